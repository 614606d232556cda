"""
bge-reranker-v2-gemma, a Gemma causal LM that judges relevance by the logit of the next token
"Yes": BAAI/bge-reranker-v2-gemma as `optimum-cli export onnx --task text-generation-with-past`
writes it (the repository holds safetensors only; no ONNX export of it is known on the Hub).

Export interface (Optimum's decoder export, as Qwen3's): inputs `input_ids` int64 [batch_size,
sequence_length], `attention_mask` int64 [batch_size, past_sequence_length + sequence_length],
`position_ids` int64 [batch_size, sequence_length], per layer `past_key_values.{i}.key` / `.value`
float32 [batch_size, num_key_value_heads, past_sequence_length, head_dim]; outputs `logits` float32
[batch_size, sequence_length, vocab_size] and `present.{i}.*`. The head is tied to the token
embeddings and written as MatMul(hidden, Transpose(embed_tokens)). The fp32 weights (10 GB) are in
onnx/model.onnx_data, so the stand-in's are too, at every size.

Architecture (transformers' GemmaModel, google/gemma-2b's sizes): token embeddings times
sqrt(hidden_size); per layer RMSNorm with (1 + weight), q/k/v projections without bias, rotate-half
RoPE (theta 10000), multi-query attention (one key/value head) scaled by 1/sqrt(head_dim), causal and
padding mask, o_proj, residual; RMSNorm (1 + weight), GeGLU MLP down(gelu_tanh(gate(x)) * up(x)),
residual; final RMSNorm (1 + weight). config.json says `hidden_act: "gelu"` without
`hidden_activation`, which transformers reads as the tanh approximation (gelu_pytorch_tanh).

The reference (FlagEmbedding's FlagLLMReranker, the model card's usage): the query is tokenised as
`A: {query}` (cut to 3/4 of max_length), the passage as `B: {passage}` (cut to max_length), with no
special tokens; the pair is `<bos>` + query + sep + passage, the passage cut so that this is at most
max_length + len(sep) + len(prompt) tokens; then sep + prompt, where sep is "\\n" and the prompt
"Given a query A and a passage B, determine whether the passage contains an answer to the query by
providing a prediction of either 'Yes' or 'No'." (a request's own prompt replaces it). Every part is
tokenised alone. The score is the logit of "Yes" (the first token of "Yes") at each row's last real
token; with `normalize=True` the reference returns its sigmoid, which is the score served.
"""
import numpy as np

import golden
import layers as L
import sizes
from folder import Folder, dump_json
from onnx_writer import FLOAT, INT64
from tokenizers import make_gemma

PROMPT = ("Given a query A and a passage B, determine whether the passage contains an answer to the query by "
          "providing a prediction of either 'Yes' or 'No'.")
SEP = "\n"

# Pairs scored under a prompt of their own (the request field `instruction`).
INSTRUCTED = [
    ("Given a query A and a passage B, determine whether the passage names a city by providing a prediction "
     "of either 'Yes' or 'No'.", "what is the capital of france?",
     "Paris is the capital and most populous city of France."),
    ("Is passage B written in Japanese? Answer 'Yes' or 'No'.", "東京はどこ", "東京は日本の首都です。"),
]
# The long document's query is longer than the prompt, so that the reference's passage cut (to
# max_length + sep + prompt less the query) is the one that binds, as the server's window does.
LONG_QUERY = ("what do researchers say about protein folding, coral reef ecology, battery chemistry, urban "
              "planning, medieval trade routes and jazz improvisation, and which questions remain open?")

# BAAI/bge-reranker-v2-gemma's config.json (google/gemma-2b's architecture), rebuilt from its
# published values.
CONFIG = {
    "architectures": ["GemmaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 2,
    "eos_token_id": 1,
    "head_dim": 256,
    "hidden_act": "gelu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 16384,
    "max_position_embeddings": 8192,
    "model_type": "gemma",
    "num_attention_heads": 8,
    "num_hidden_layers": 18,
    "num_key_value_heads": 1,
    "pad_token_id": 0,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "torch_dtype": "float32",
    "transformers_version": "4.38.1",
    "use_cache": True,
    "vocab_size": 256000,
}
GENERATION_CONFIG = {"_from_model_config": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
                     "transformers_version": "4.38.1"}

STANDINS = [
    {
        "repo": "BAAI/bge-reranker-v2-gemma",
        "task": "rerank",
        "form": "causal-lm",
        "base_model": "google/gemma-2b",
        "model_max_length": 1000000000000000019884624838656,
        "opset": 14,
        "seed": 3201,
    },
]

BATCH, SEQ, PAST = "batch_size", "sequence_length", "past_sequence_length"
TOTAL = "past_sequence_length + sequence_length"


def tiny_config(size):
    cfg = sizes.shrink(CONFIG, size)
    if size != "real":
        cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]  # as the real one: 2048 / 8
    return cfg


def declare(W, cfg, rows):
    H, I, D = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    nq, nkv = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    W.normal("model.embed_tokens.weight", (rows, H), 1.0)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        gemma_norm(W, p + "input_layernorm", H)
        W.linear(p + "self_attn.q_proj", H, nq, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "self_attn.k_proj", H, nkv, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "self_attn.v_proj", H, nkv, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "self_attn.o_proj", nq, H, 1.0 / np.sqrt(nq), bias=False)
        gemma_norm(W, p + "post_attention_layernorm", H)
        W.linear(p + "mlp.gate_proj", H, I, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "mlp.up_proj", H, I, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "mlp.down_proj", I, H, 1.0 / np.sqrt(I), bias=False)
    gemma_norm(W, "model.norm", H)


def gemma_norm(W, prefix, dim):
    """Gemma stores an RMSNorm's weight as an offset from 1 (it multiplies by 1 + weight)."""
    W.normal(prefix + ".weight", (dim,), 0.1)


# ---------------------------------------------------------------------------------------------
# Graph and numpy forward
# ---------------------------------------------------------------------------------------------
def rms_norm(b, x, prefix, eps):
    """x * rsqrt(mean(x^2) + eps) * (1 + weight), as torch exports GemmaRMSNorm."""
    var = b.reduce_mean(b.op("Pow", [x, b.c(2.0)]), [-1])
    inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [var, b.c(float(eps))])])])
    return b.op("Mul", [b.op("Mul", [x, inv]), b.op("Add", [b.c(1.0), b.p(prefix + ".weight")])])


def graph(b, cfg, vocab):
    H, D, eps = cfg["hidden_size"], cfg["head_dim"], cfg["rms_norm_eps"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n = cfg["num_hidden_layers"]
    x = b.op("Gather", [b.p("model.embed_tokens.weight"), "input_ids"], axis=0)
    x = b.op("Mul", [x, b.c(np.float32(np.sqrt(H)))])
    cos, sin = b.rotary_cos_sin("position_ids", D, cfg["rope_theta"])
    past = b.dim("past_key_values.0.key", 2)
    total = b.op("Add", [past, b.dim("input_ids", 1)])
    allowed = b.op("And", [b.key_allowed("attention_mask"), b.causal_allowed(total, start=past)])
    bias = b.allowed_to_bias(allowed)
    for i in range(n):
        p = f"model.layers.{i}."
        a = f"{p}self_attn."
        h = rms_norm(b, x, p + "input_layernorm", eps)
        q = b.split_heads(b.linear(h, a + "q_proj", bias=False), heads, D)
        k = b.split_heads(b.linear(h, a + "k_proj", bias=False), kv_heads, D)
        v = b.split_heads(b.linear(h, a + "v_proj", bias=False), kv_heads, D)
        k = b.output("Concat", [f"past_key_values.{i}.key", b.rotary(k, cos, sin, D)], f"present.{i}.key", axis=2)
        v = b.output("Concat", [f"past_key_values.{i}.value", v], f"present.{i}.value", axis=2)
        k = b.repeat_kv(k, kv_heads, heads // kv_heads, D)
        v = b.repeat_kv(v, kv_heads, heads // kv_heads, D)
        ctx = b.attention(b.rotary(q, cos, sin, D), b.op("Transpose", [k], perm=[0, 1, 3, 2]), v, bias, D)
        x = b.op("Add", [x, b.linear(b.merge_heads(ctx, heads * D), a + "o_proj", bias=False)])
        h = rms_norm(b, x, p + "post_attention_layernorm", eps)
        gate = b.gelu_tanh(b.linear(h, p + "mlp.gate_proj", bias=False))
        up = b.linear(h, p + "mlp.up_proj", bias=False)
        x = b.op("Add", [x, b.linear(b.op("Mul", [gate, up]), p + "mlp.down_proj", bias=False)])
    x = rms_norm(b, x, "model.norm", eps)
    # The head tied to the token embeddings: their table transposed.
    table = b.op("Transpose", [b.p("model.embed_tokens.weight")], perm=[1, 0])
    b.output("MatMul", [x, table], "logits")

    inputs = [("input_ids", INT64, [BATCH, SEQ]), ("attention_mask", INT64, [BATCH, TOTAL]),
              ("position_ids", INT64, [BATCH, SEQ])]
    outputs = [("logits", FLOAT, [BATCH, SEQ, vocab])]
    for i in range(n):
        for part in ("key", "value"):
            inputs.append((f"past_key_values.{i}.{part}", FLOAT, [BATCH, kv_heads, PAST, D]))
            outputs.append((f"present.{i}.{part}", FLOAT, [BATCH, kv_heads, TOTAL, D]))
    return inputs, outputs


def np_rms_norm(W, x, prefix, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1.0 + W[prefix + ".weight"].astype(np.float64))


def forward(W, cfg, input_ids, attention_mask, position_ids):
    """The final norm's output in float64."""
    H, eps, theta = cfg["hidden_size"], cfg["rms_norm_eps"], cfg["rope_theta"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    x = W["model.embed_tokens.weight"][input_ids].astype(np.float64) * float(np.float32(np.sqrt(H)))
    allowed = L.allowed_mask(attention_mask, causal=True)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = f"{p}self_attn."
        h = np_rms_norm(W, x, p + "input_layernorm", eps)
        q = L.rotary(L.heads(L.linear(W, h, a + "q_proj", bias=False), heads), position_ids, theta)
        k = L.rotary(L.heads(L.linear(W, h, a + "k_proj", bias=False), kv_heads), position_ids, theta)
        v = L.heads(L.linear(W, h, a + "v_proj", bias=False), kv_heads)
        rep = heads // kv_heads
        ctx = L.attention(q, np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1), allowed)
        x = x + L.linear(W, L.merge(ctx), a + "o_proj", bias=False)
        h = np_rms_norm(W, x, p + "post_attention_layernorm", eps)
        f = L.gelu_tanh(L.linear(W, h, p + "mlp.gate_proj", bias=False)) * L.linear(W, h, p + "mlp.up_proj", bias=False)
        x = x + L.linear(W, f, p + "mlp.down_proj", bias=False)
    return np_rms_norm(W, x, "model.norm", eps)


# ---------------------------------------------------------------------------------------------
# The folder and golden.json
# ---------------------------------------------------------------------------------------------
def reference_ids(tok, max_length, query, passage, prompt):
    """FlagLLMReranker's input ids of one pair (FlagEmbedding's get_inputs / compute_score)."""
    sep, prompt_ids = tok.encode(SEP), tok.encode(prompt)
    q = tok.encode(f"A: {query}")[: max_length * 3 // 4]
    p = tok.encode(f"B: {passage}")[:max_length]
    # prepare_for_model([bos] + q, sep + p, truncation="only_second", max_length=encode_max_length)
    encode_max_length = max_length + len(sep) + len(prompt_ids)
    second = (sep + p)[: max(0, encode_max_length - 1 - len(q))]
    return [tok.bos_id] + q + second + sep + prompt_ids


def write(standin, out_dir, size, shared_dir):
    cfg = tiny_config(size)
    window = sizes.window(CONFIG["max_position_embeddings"], size)
    tok = make_gemma(shared_dir, standin["model_max_length"] if size == "real" else window, whole_words=("Yes",))
    rows = CONFIG["vocab_size"] if size == "real" else tok.vocab_size
    cfg["vocab_size"] = rows
    yes = tok.encode("Yes")
    assert len(yes) == 1, '"Yes" must be one token'
    yes = yes[0]

    W = L.Weights(standin["seed"])
    declare(W, cfg, rows)
    # Random weights judge with certainty: a final norm scaled down brings the "Yes" logit to a few
    # units, where scores differ from pair to pair.
    W.w["model.norm.weight"] = ((1.0 + W.w["model.norm.weight"]) * 0.25 - 1.0).astype(np.float32)
    b = L.Onnx(W, opset=standin["opset"])
    inputs, outputs = graph(b, cfg, rows)
    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b, inputs, outputs, opset=standin["opset"], external=True)
    del b
    files = {"config.json": dump_json(cfg), "generation_config.json": dump_json(GENERATION_CONFIG)}
    for rel, data in list(files.items()) + list(tok.files.items()):
        out.bytes(rel, data)

    embed = W.w["model.embed_tokens.weight"]

    def yes_logit(ids, mask, positions, last):
        h = forward(W.w, cfg, ids, mask, positions)[np.arange(len(ids)), last]
        return h @ embed[yes].astype(np.float64)

    out.golden(make_golden(standin, size, tok, window, yes_logit))
    return {"params": W.params(), "files": out.files}


def make_golden(standin, size, tok, window, yes_logit):
    """golden.json: the default prompt's pairs (and a document over the window), then pairs under
    prompts of their own; run one at a time, checked against a left-padded batch (positions 0..S-1,
    padding included, as the reference runs it) and a right-padded one (each row's last real token).
    The reference's max_length is the window less twice sep and prompt, so that its longest input
    is the window: what the server feeds for a document's first window."""
    if golden.SKIP:
        return None
    fixed = len(tok.encode(SEP)) + len(tok.encode(PROMPT))
    max_length = window - 2 * fixed
    pairs = [(PROMPT, q, d) for q, d in golden.RERANK_PAIRS]
    pairs.append((PROMPT, LONG_QUERY, golden.long_text(tok, window)))
    pairs += INSTRUCTED
    rows = [reference_ids(tok, max_length, q, d, prompt) for prompt, q, d in pairs]
    assert len(rows[len(golden.RERANK_PAIRS)]) == window, "the long pair must fill the window"
    assert len(tok.encode(f"A: {LONG_QUERY}")) + 1 >= len(tok.encode(PROMPT))

    def run(batch, side):
        ids, mask = golden.pad(batch, tok.pad_id, side)
        if side == "left":
            positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
            return yes_logit(ids, mask, positions, ids.shape[1] - 1)
        positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 0)
        return yes_logit(ids, mask, positions, mask.sum(1) - 1)

    singles = [float(run([r], "left")[0]) for r in rows]
    short = [i for i, r in enumerate(rows) if len(r) < window]
    for side in ("left", "right"):
        batch = run([rows[i] for i in short], side)
        diff = float(np.abs(batch - np.array([singles[i] for i in short])).max())
        assert diff < golden.BATCH_TOLERANCE, f"{standin['repo']}: {side}-padded batch differs by {diff}"

    def item(pair, ids, logit):
        prompt, query, document = pair
        entry = {"query": query, "document": document, "input_ids": ids, "logits": golden.r7([logit]),
                 "score": golden.r7([1.0 / (1.0 + np.exp(-logit))])[0]}
        return entry if prompt == PROMPT else {"instruction": prompt, **entry}

    items = [item(p, r, s) for p, r, s in zip(pairs, rows, singles)]
    count = len(golden.RERANK_PAIRS) + 1
    return {"repo": standin["repo"], "family": "gemma", "task": "rerank", "form": standin["form"],
            "size": size, "tolerance": golden.TOLERANCE, "window": window, "template": "bge-reranker-gemma",
            "instruction": PROMPT, "max_length": max_length, "rerank": items[:count], "instructed": items[count:]}
