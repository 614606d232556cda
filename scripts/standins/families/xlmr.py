"""
Models with the XLM-RoBERTa SentencePiece Unigram tokenizer (`<s> A </s>`, pairs `<s> A </s></s> B </s>`).

* intfloat/multilingual-e5-small: a BERT encoder (BertModel, absolute positions, token type ids
  input) under the XLM-R tokenizer; mean pooling; "query: " / "passage: " prefixes.
* intfloat/multilingual-e5-base, BAAI/bge-m3: XLMRobertaModel (mean / CLS pooling).
* BAAI/bge-reranker-base, BAAI/bge-reranker-large, jinaai/jina-reranker-v2-base-multilingual:
  XLMRobertaForSequenceClassification, logits [batch, 1] = out_proj(tanh(dense(h[:, 0]))).
* BAAI/bge-reranker-v2-m3: the repository as it is, with no ONNX export (a model to refuse).

XLM-RoBERTa exports (Optimum's XLM-R config): inputs `input_ids`, `attention_mask` int64; no token
type ids (the graph gathers type 0 from its buffer); position ids computed in the graph from the
input ids: cumsum(ids != pad) * (ids != pad) + padding_idx (pad 1, first token at 2). Outputs
`last_hidden_state` (embedders) or `logits` (cross-encoders).
"""
import functools
import json

import numpy as np

import golden
import layers as L
import sizes
from families.bert import declare_encoder, encoder_graph, encoder_numpy
from folder import Folder, dump_json, pooling_config, sentence_transformers_modules, write_model_files
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

DYNAMIC = ["batch_size", "sequence_length"]
PADDING_IDX = 1
XLMR_VOCAB = 250002  # rows of the real tokenizer; larger tables (e5-small: 250037) have unused rows


def transformers_config(**keys):
    """config.json as transformers writes it (sorted keys)."""
    return dict(sorted(keys.items()))


def xlmr_config(architecture, hidden, layers, heads, intermediate, positions, version, **extra):
    return transformers_config(
        architectures=[architecture], attention_probs_dropout_prob=0.1, bos_token_id=0, classifier_dropout=None,
        eos_token_id=2, hidden_act="gelu", hidden_dropout_prob=0.1, hidden_size=hidden, initializer_range=0.02,
        intermediate_size=intermediate, layer_norm_eps=1e-05, max_position_embeddings=positions,
        model_type="xlm-roberta", num_attention_heads=heads, num_hidden_layers=layers, output_past=True,
        pad_token_id=PADDING_IDX, position_embedding_type="absolute", torch_dtype="float32",
        transformers_version=version, type_vocab_size=1, use_cache=True, vocab_size=XLMR_VOCAB, **extra)


ONE_LABEL = {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}

E5_SMALL = transformers_config(
    _name_or_path="tmp/", architectures=["BertModel"], attention_probs_dropout_prob=0.1, classifier_dropout=None,
    hidden_act="gelu", hidden_dropout_prob=0.1, hidden_size=384, initializer_range=0.02, intermediate_size=1536,
    layer_norm_eps=1e-12, max_position_embeddings=512, model_type="bert", num_attention_heads=12,
    num_hidden_layers=12, pad_token_id=0, position_embedding_type="absolute", tokenizer_class="XLMRobertaTokenizer",
    torch_dtype="float32", transformers_version="4.29.0.dev0", type_vocab_size=2, use_cache=True, vocab_size=250037)

E5_BASE = xlmr_config("XLMRobertaModel", 768, 12, 12, 3072, 514, "4.29.0.dev0", _name_or_path="tmp/")
BGE_M3 = xlmr_config("XLMRobertaModel", 1024, 24, 16, 4096, 8194, "4.33.0", _name_or_path="")
RERANKER_BASE = xlmr_config("XLMRobertaForSequenceClassification", 768, 12, 12, 3072, 514, "4.30.0", **ONE_LABEL)
RERANKER_LARGE = xlmr_config("XLMRobertaForSequenceClassification", 1024, 24, 16, 4096, 514, "4.30.0", **ONE_LABEL)
RERANKER_V2_M3 = xlmr_config("XLMRobertaForSequenceClassification", 1024, 24, 16, 4096, 8194, "4.38.1",
                             _name_or_path="BAAI/bge-m3", **ONE_LABEL)
# Remote code (jinaai/jina-xlm-roberta-flash-implementation): flash attention kernels, the same
# numerics as XLM-R; 1026 positions (1024 tokens).
_FLASH = "jinaai/jina-xlm-roberta-flash-implementation--"
JINA_V2 = transformers_config(
    **{k: v for k, v in xlmr_config("XLMRobertaForSequenceClassification", 768, 12, 12, 3072, 1026, "4.40.2",
                                    **ONE_LABEL).items() if k != "torch_dtype"},
    _name_or_path="jinaai/jina-reranker-v2-base-multilingual",
    auto_map={"AutoConfig": _FLASH + "configuration_xlm_roberta.XLMRobertaFlashConfig",
              "AutoModel": _FLASH + "modeling_xlm_roberta.XLMRobertaModel",
              "AutoModelForSequenceClassification": _FLASH + "modeling_xlm_roberta.XLMRobertaForSequenceClassification"},
    emb_pooler=None, load_trained_adapters=False, lora_adaptations=None, lora_alpha=1, lora_dropout_p=0.0,
    lora_main_params_trainable=False, lora_rank=4, matryoshka_dimensions=None, num_labels=1, torch_dtype="bfloat16",
    use_flash_attn=True)


def embedder_files(config, pooling, max_seq_length, st_version):
    dim = config["hidden_size"]
    return {
        "config.json": dump_json(config),
        "modules.json": dump_json(sentence_transformers_modules(True), newline=False),
        "1_Pooling/config.json": dump_json(pooling_config(dim, pooling), newline=False),
        "sentence_bert_config.json": dump_json({"max_seq_length": max_seq_length, "do_lower_case": False}, newline=False),
        "config_sentence_transformers.json": dump_json({"__version__": st_version}, newline=False),
    }


ST_2_2_2 = {"sentence_transformers": "2.2.2", "transformers": "4.29.0.dev0", "pytorch": "1.13.0+cu117"}
E5_PREFIXES = {"query": "query: ", "document": "passage: "}  # documented; not declared in the repos' files

STANDINS = [
    {
        "repo": "intfloat/multilingual-e5-small", "task": "embedding", "arch": "bert",
        "files": lambda: embedder_files(E5_SMALL, "mean", 512, ST_2_2_2),
        "window_from": "sentence_bert_config.json", "pooling": "mean", "normalize": True,
        "prompts": E5_PREFIXES, "opset": 14, "seed": 3001,
    },
    {
        "repo": "intfloat/multilingual-e5-base", "task": "embedding", "arch": "xlmr",
        "files": lambda: embedder_files(E5_BASE, "mean", 512, ST_2_2_2),
        "window_from": "sentence_bert_config.json", "pooling": "mean", "normalize": True,
        "prompts": E5_PREFIXES, "opset": 14, "seed": 3002,
    },
    {
        # onnx/: model.onnx + model.onnx_data + Constant_7_attr__value (the type-ids buffer, int64
        # [1, 8194]) and copies of the tokenizer files and config, as the repo's "Adding ONNX file" has.
        "repo": "BAAI/bge-m3", "task": "embedding", "arch": "xlmr",
        "files": lambda: embedder_files(BGE_M3, "cls", 8192, {"sentence_transformers": "2.2.2",
                                                              "transformers": "4.33.0", "pytorch": "2.1.2+cu121"}),
        "window_from": "sentence_bert_config.json", "pooling": "cls", "normalize": True,
        "external_data": True, "type_ids_constant": "Constant_7_attr__value", "onnx_copies": True,
        "opset": 14, "seed": 3003,
    },
    {
        # A community export of bge-m3's three heads in one graph (FlagEmbedding's BGEM3 model):
        # `dense_vecs` (the normalised [CLS] vector) and `sparse_vecs` (the lexical weights,
        # relu(Linear(hidden -> 1)) per token, [batch, seq, 1]); its `colbert_vecs` are left out.
        "repo": "aapot/bge-m3-onnx", "task": "embedding", "arch": "xlmr", "m3_heads": True,
        "files": lambda: embedder_files(BGE_M3, "cls", 8192, {"sentence_transformers": "2.2.2",
                                                              "transformers": "4.33.0", "pytorch": "2.1.2+cu121"}),
        "window_from": "sentence_bert_config.json", "pooling": "cls", "normalize": True,
        "opset": 14, "seed": 3008,
    },
    {
        # onnx/ holds model.onnx (1.11 GB, no external data) with copies of the config and tokenizer
        "repo": "BAAI/bge-reranker-base", "task": "rerank", "arch": "xlmr",
        "files": lambda: {"config.json": dump_json(RERANKER_BASE)}, "max_length": 512,
        "onnx_copies": True, "opset": 14, "seed": 3004,
    },
    {
        "repo": "BAAI/bge-reranker-large", "task": "rerank", "arch": "xlmr",
        "files": lambda: {"config.json": dump_json(RERANKER_LARGE)}, "max_length": 512,
        "external_data": True, "opset": 14, "seed": 3005,
    },
    {
        "repo": "jinaai/jina-reranker-v2-base-multilingual", "task": "rerank", "arch": "xlmr",
        "files": lambda: {"config.json": dump_json(JINA_V2)}, "max_length": 1024,
        "opset": 14, "seed": 3006,
    },
    {
        # No ONNX file in the repository (its users ask for one): the server must refuse it and
        # name the export command. Config and tokenizer only; no golden.
        "repo": "BAAI/bge-reranker-v2-m3", "task": "rerank", "arch": "xlmr", "onnx": False,
        "files": lambda: {"config.json": dump_json(RERANKER_V2_M3)}, "max_length": 8192,
        "seed": 3007,
    },
]


@functools.lru_cache(maxsize=None)
def _tokenizer(shared_dir, model_max_length):
    # training the SentencePiece model takes seconds: once per window
    return make_tokenizer("xlmr", shared_dir, model_max_length)


def _declare_head(W, H):
    W.linear("classifier.dense", H, H, 1.0 / np.sqrt(H))
    W.linear("classifier.out_proj", H, 1, 1.0 / np.sqrt(H))


def _graph(b, standin, cfg):
    """The XLM-R (or BERT) encoder with the export's inputs; returns the graph outputs' specs."""
    prefix = "roberta." if standin["task"] == "rerank" else ""
    if standin["arch"] == "bert":
        h = encoder_graph(b, cfg, "absolute", "token_type_ids", prefix=prefix)
    else:
        positions = b.padded_positions("input_ids", PADDING_IDX)
        # token_type_ids buffer [1, max_positions] of zeros, sliced to the sequence and expanded
        buffer = np.zeros((1, cfg["max_position_embeddings"]), np.int64)
        if standin.get("type_ids_constant"):
            buffer = b.external_constant(buffer, standin["type_ids_constant"])
        else:
            buffer = b.c(buffer, np.int64)
        types = b.op("Slice", [buffer, b.i64([0]), b.dim("input_ids", 1), b.i64([1])])
        types = b.op("Expand", [types, b.op("Shape", ["input_ids"])])
        h = encoder_graph(b, cfg, positions, types, prefix=prefix)
    if standin.get("m3_heads"):
        first = b.op("Gather", [h, b.i64(0)], axis=1)
        b.output("LpNormalization", [first], "dense_vecs", axis=-1, p=2)
        weights = b.op("Add", [b.op("MatMul", [h, b.p("sparse_linear.weight")]), b.p("sparse_linear.bias")])
        b.output("Relu", [weights], "sparse_vecs")
        return [("dense_vecs", FLOAT, ["batch_size", cfg["hidden_size"]]), ("sparse_vecs", FLOAT, DYNAMIC + [1])]
    if standin["task"] == "embedding":
        b.output("Identity", [h], "last_hidden_state")
        return [("last_hidden_state", FLOAT, DYNAMIC + [cfg["hidden_size"]])]
    first = b.op("Gather", [h, b.i64(0)], axis=1)  # <s>
    x = b.op("Tanh", [b.linear(first, "classifier.dense")])
    y = b.op("MatMul", [x, b.p("classifier.out_proj.weight")])
    b.output("Add", [y, b.p("classifier.out_proj.bias")], "logits")
    return [("logits", FLOAT, ["batch_size", 1])]


def _hidden(W, standin, cfg, ids, mask, types):
    prefix = "roberta." if standin["task"] == "rerank" else ""
    if standin["arch"] == "bert":
        pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    else:
        pos = L.padded_positions(ids, PADDING_IDX)
    return encoder_numpy(W, cfg, ids, mask, np.zeros_like(types), pos, prefix=prefix)


def write(standin, out_dir, size, shared_dir):
    files = standin["files"]()
    real = json.loads(files["config.json"])
    if "window_from" in standin:
        real_window = json.loads(files[standin["window_from"]])["max_seq_length"]
    else:
        real_window = standin["max_length"]
    window = sizes.window(real_window, size)
    cfg = sizes.shrink(real, size)
    offset = PADDING_IDX + 1 if standin["arch"] == "xlmr" else 0
    cfg["max_position_embeddings"] = min(real["max_position_embeddings"], window + offset) if size == "tiny" \
        else real["max_position_embeddings"]
    tok = _tokenizer(shared_dir, window)
    if size == "tiny":
        cfg["vocab_size"] = tok.vocab_size + real["vocab_size"] - XLMR_VOCAB
    assert tok.vocab_size <= cfg["vocab_size"]

    out = Folder(out_dir)
    write_model_files(out, files, cfg, window, size)
    out.tokenizer(tok)
    if standin.get("onnx") is False:
        return {"params": 0, "files": out.files}  # no graph to generate
    W = L.Weights(standin["seed"])
    declare_encoder(W, cfg, prefix="roberta." if standin["task"] == "rerank" else "")
    if standin["task"] == "rerank":
        _declare_head(W, cfg["hidden_size"])
    if standin.get("m3_heads"):
        W.linear("sparse_linear", cfg["hidden_size"], 1, 1.0 / np.sqrt(cfg["hidden_size"]))

    b = L.Onnx(W, opset=standin["opset"])
    outputs = _graph(b, standin, cfg)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if standin["arch"] == "bert" else [])
    out.onnx("onnx/model.onnx", b, [(n, INT64, DYNAMIC) for n in names], outputs, opset=standin["opset"],
             external=True if standin.get("external_data") else None)
    del b
    if standin.get("onnx_copies"):
        # Optimum saves the config it exported from, named after the repo (bge-m3's is 11 bytes
        # longer than the root one: "_name_or_path": "BAAI/bge-m3")
        out.bytes("onnx/config.json", dump_json({**cfg, "_name_or_path": standin["repo"]}))
        out.tokenizer(tok, "onnx/")

    W64 = W.float64()
    if standin["task"] == "embedding":
        gold, _ = golden.embedding(repo=standin["repo"], family="xlmr", size=size, tok=tok, window=window,
                                   hidden=lambda ids, mask, types: _hidden(W64, standin, cfg, ids, mask, types),
                                   pooling=standin["pooling"], normalize=standin["normalize"],
                                   prompts=standin.get("prompts"))
        if standin.get("m3_heads"):
            specials = set(tok.single([]))

            def lexical(ids, mask, types):
                # bge-m3's lexical weights: per token id, the max of relu(w . h + b) over its tokens
                w = np.maximum(L.linear(W64, _hidden(W64, standin, cfg, ids, mask, types), "sparse_linear")[..., 0], 0.0)
                out = np.zeros((ids.shape[0], cfg["vocab_size"]))
                for r, t in zip(*np.nonzero(mask)):
                    if ids[r, t] not in specials:
                        out[r, ids[r, t]] = max(out[r, ids[r, t]], w[r, t])
                return out

            gold["sparse"] = golden.sparse(repo=standin["repo"], family="xlmr", size=size, tok=tok, window=window,
                                           sparse=lexical)["sparse"]
    else:
        def logits(ids, mask, types):
            h = _hidden(W64, standin, cfg, ids, mask, types)
            x = np.tanh(L.linear(W64, h[:, 0], "classifier.dense"))
            return L.linear(W64, x, "classifier.out_proj")

        gold, _ = golden.rerank(repo=standin["repo"], family="xlmr", size=size, tok=tok, window=window, logits=logits)
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
