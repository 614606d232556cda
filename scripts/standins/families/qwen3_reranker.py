"""
Qwen3-Reranker, a decoder that judges relevance by the next token it would write: "yes" or "no".
Two forms of Qwen/Qwen3-Reranker-0.6B:

* The causal LM, as onnx-community/Qwen3-Reranker-0.6B-ONNX exports it (Optimum
  `text-generation-with-past`): the inputs of Qwen3-Embedding's export (`input_ids`,
  `attention_mask` [batch_size, past + sequence_length], `position_ids`, per layer
  `past_key_values.{i}.key` / `.value`), outputs `logits` float32 [batch_size, sequence_length,
  vocab_size] = lm_head(final norm), and `present.{i}.*`. The 0.6B ties lm_head to the token
  embeddings; the export writes the head as a MatMul with its own [hidden, vocab] initializer (the
  transposed table). The Hub repository holds only its int8 and 4-bit graphs; the stand-in has the
  fp32 graph they are made from (weights in onnx/model.onnx_data), and beside it the same weights
  with attention fused into ONNX Runtime's GroupQueryAttention as those graphs have it
  (onnx/model_gqa.onnx, tiny size only, no variant the server picks: read by the tests of the
  graph cut and the yes/no rerankers' test).
* The sequence-classification conversion, tomaarsen/Qwen3-Reranker-0.6B-seq-cls exported with
  Optimum (`text-classification`: inputs `input_ids`, `attention_mask`; output `logits`
  [batch_size, 1]): Qwen3ForSequenceClassification, whose one-label `score` head is
  lm_head["yes"] - lm_head["no"], read at each row's last token that is not padding. The stand-in
  shares the causal stand-in's weights, so both give the same scores.

The reference (the model card's usage code): each pair is written as
`<Instruct>: {instruction}\\n<Query>: {query}\\n<Document>: {doc}`, tokenised (Qwen3's tokenizer
adds no special tokens), cut to the window less the template's prefix and suffix, and put between
the prefix (the system text and the user turn's start) and the suffix (the assistant turn with an
empty think block); rows are left-padded; the score is softmax(logit("no"), logit("yes"))[yes] at
the last position, which is sigmoid(logit("yes") - logit("no")).
"""
import numpy as np

import golden
import layers as L
import sizes
from families import qwen3
from folder import Folder, added_token_ids, dump_json
from onnx_writer import FLOAT
from tokenizers import make_qwen3

SYSTEM = ('Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
          'Note that the answer can only be "yes" or "no".')
PREFIX = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
FUSED_GRAPH = "onnx/model_gqa.onnx"
INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

# Pairs scored under an instruction of their own (the request field `instruction`).
INSTRUCTED = [
    ("Given a question, retrieve passages that name a city", "what is the capital of france?",
     "Paris is the capital and most populous city of France."),
    ("Judge whether the passage is written in Japanese", "東京はどこ", "東京は日本の首都です。"),
]

# Qwen/Qwen3-Reranker-0.6B's config.json (transformers 4.51.3), with the Transformers.js facts.
CONFIG = dict(qwen3.CONFIG, max_position_embeddings=40960, max_window_layers=28)

SEQ_CLS_CONFIG = dict(CONFIG, architectures=["Qwen3ForSequenceClassification"], id2label={"0": "LABEL_0"},
                      label2id={"LABEL_0": 0}, pad_token_id=151643)
SEQ_CLS_CONFIG.pop("transformers.js_config")

STANDINS = [
    {
        "repo": "onnx-community/Qwen3-Reranker-0.6B-ONNX",
        "task": "rerank",
        "form": "causal-lm",
        "base_model": "Qwen/Qwen3-Reranker-0.6B",
        "model_max_length": 131072,
        "opset": 14,
        "seed": 3101,
    },
    {
        "repo": "tomaarsen/Qwen3-Reranker-0.6B-seq-cls",
        "task": "rerank",
        "form": "seq-cls",
        "base_model": "Qwen/Qwen3-Reranker-0.6B",
        "model_max_length": 131072,
        "opset": 14,
        "seed": 3101,  # the causal stand-in's weights: the same scores
    },
]


def format_instruction(instruction, query, doc):
    return f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}"


def template_ids(tok, window, instruction, query, doc):
    """The reference's input ids: the formatted pair cut to the window less prefix and suffix."""
    prefix, suffix = tok.encode(PREFIX), tok.encode(SUFFIX)
    content = tok.encode(format_instruction(instruction, query, doc))[: window - len(prefix) - len(suffix)]
    return prefix + content + suffix


def write(standin, out_dir, size, shared_dir):
    cfg = qwen3.tiny_config(CONFIG if standin["form"] == "causal-lm" else SEQ_CLS_CONFIG, size)
    window = sizes.window(cfg["max_position_embeddings"], size)
    tok = make_qwen3(shared_dir, standin["model_max_length"] if size == "real" else window,
                     appends_end=False, whole_words=("yes", "no"))
    rows = CONFIG["vocab_size"] if size == "real" else tok.vocab_size
    cfg["vocab_size"] = rows
    end_id = added_token_ids(tok.files["tokenizer.json"])["<|endoftext|>"]
    cfg["bos_token_id"] = cfg["eos_token_id"] = end_id
    if standin["form"] == "seq-cls":
        cfg["pad_token_id"] = end_id
    yes, no = tok.encode("yes"), tok.encode("no")
    assert len(yes) == 1 and len(no) == 1, "yes and no must be single tokens"
    yes, no = yes[0], no[0]

    W = L.Weights(standin["seed"])
    qwen3.declare(W, cfg, rows)
    embed = W.w["model.embed_tokens.weight"]
    # Random weights judge with certainty (scores of 1.0 to the fourth decimal): a smaller final norm
    # brings the yes / no margins to a few units, where scores differ from pair to pair.
    W.w["model.norm.weight"] = (W.w["model.norm.weight"] * 0.08).astype(np.float32)
    if standin["form"] == "causal-lm":
        W.w["lm_head.weight"] = np.ascontiguousarray(embed.T)  # tied, as the export writes it: [hidden, vocab]
    else:
        W.w["score.weight"] = (embed[yes] - embed[no])[:, None].astype(np.float32)  # [hidden, 1]
    b = L.Onnx(W, opset=standin["opset"])
    if standin["form"] == "causal-lm":
        inputs, outputs = qwen3.graph(b, cfg, head=lambda b, x: lm_head(b, x, rows))
    else:
        inputs, outputs = qwen3.graph(b, cfg, head=lambda b, x: score_head(b, x, end_id), cache=False)
    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b, inputs, outputs, opset=standin["opset"], external=True)
    del b
    if standin["form"] == "causal-lm" and size != "real":
        # The same weights with attention fused, as the repository's own graphs have it (fp32 here;
        # tiny only: at the real size it would be a second copy of 2.4 GB of weights).
        b = L.Onnx(W, opset=standin["opset"])
        inputs, outputs = qwen3.graph(b, cfg, head=lambda b, x: lm_head(b, x, rows), fused_rows=window)
        out.onnx(FUSED_GRAPH, b, inputs, outputs, opset=standin["opset"], external=False)
        del b
    generation = dict(qwen3.GENERATION_CONFIG, bos_token_id=end_id, eos_token_id=end_id)
    files = {"config.json": dump_json(cfg)}
    if standin["form"] == "causal-lm":
        files["generation_config.json"] = dump_json(generation)
    for rel, data in list(files.items()) + list(tok.files.items()):
        out.bytes(rel, data)

    def hidden(ids, mask, positions):
        return qwen3.forward(W.w, cfg, ids, mask, positions)

    def yes_no(ids, mask, positions, last):
        """logit("yes"), logit("no") of each row at its column `last`."""
        h = hidden(ids, mask, positions)[np.arange(len(ids)), last]
        return np.stack([h @ embed[yes].astype(np.float64), h @ embed[no].astype(np.float64)], axis=1)

    out.golden(make_golden(standin, size, tok, window, yes_no))
    return {"params": W.params(), "files": out.files}


def lm_head(b, x, vocab):
    b.output("MatMul", [x, b.p("lm_head.weight")], "logits")
    return ("logits", FLOAT, [qwen3.BATCH, qwen3.SEQ, vocab])


def score_head(b, x, pad_id):
    """Qwen3ForSequenceClassification: score(h) at the last token that is not padding, as its
    export computes it: argmax over positions of position * (input_ids != pad)."""
    scores = b.op("MatMul", [x, b.p("score.weight")])  # [B, S, 1]
    seq = b.squeeze(b.dim("input_ids", 1), [0])
    positions = b.op("Range", [b.i64(0), seq, b.i64(1)])
    not_pad = b.op("Cast", [b.op("Not", [b.op("Equal", ["input_ids", b.i64(pad_id)])])], to=7)
    last = b.op("ArgMax", [b.op("Mul", [not_pad, positions])], axis=-1, keepdims=1)  # [B, 1]
    b.output("GatherND", [scores, last], "logits", batch_dims=1)
    return ("logits", FLOAT, [qwen3.BATCH, 1])


def make_golden(standin, size, tok, window, yes_no):
    """golden.json: the default instruction's pairs (and a document over the window), then pairs
    under instructions of their own; run one at a time, checked against a left-padded batch (the
    reference's, positions 0..S-1 padding included) and a right-padded one (each row's positions
    from 0, its last real token read)."""
    if golden.SKIP:
        return None
    pairs = [(INSTRUCTION, q, d) for q, d in golden.RERANK_PAIRS]
    pairs.append((INSTRUCTION, "what do researchers say about protein folding?", golden.long_text(tok, window)))
    pairs += INSTRUCTED
    rows = [template_ids(tok, window, *p) for p in pairs]

    def run(batch, side):
        ids, mask = golden.pad(batch, tok.pad_id, side)
        if side == "left":
            positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
            return yes_no(ids, mask, positions, ids.shape[1] - 1)
        positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 0)
        return yes_no(ids, mask, positions, mask.sum(1) - 1)

    singles = [run([r], "left")[0] for r in rows]
    short = [i for i, r in enumerate(rows) if len(r) < window]
    for side in ("left", "right"):
        batch = run([rows[i] for i in short], side)
        diff = float(np.abs(batch - np.stack([singles[i] for i in short])).max())
        assert diff < golden.BATCH_TOLERANCE, f"{standin['repo']}: {side}-padded batch differs by {diff}"

    def item(pair, ids, logits):
        instruction, query, document = pair
        relevance = float(logits[0] - logits[1])
        entry = {"query": query, "document": document, "input_ids": ids,
                 "logits": golden.r7(logits if standin["form"] == "causal-lm" else [relevance]),
                 "score": golden.r7([1.0 / (1.0 + np.exp(-relevance))])[0]}
        return entry if instruction == INSTRUCTION else {"instruction": instruction, **entry}

    items = [item(p, r, s) for p, r, s in zip(pairs, rows, singles)]
    count = len(golden.RERANK_PAIRS) + 1
    return {"repo": standin["repo"], "family": "qwen3", "task": "rerank", "form": standin["form"],
            "size": size, "tolerance": golden.TOLERANCE, "window": window, "template": "qwen3-reranker",
            "instruction": INSTRUCTION, "rerank": items[:count], "instructed": items[count:]}
