"""
SPLADE sparse encoders (BertForMaskedLM): prithivida/Splade_PP_en_v1.

Export interface (Optimum / torch.onnx fill-mask): inputs `input_ids`, `attention_mask`,
`token_type_ids`, int64 [batch_size, sequence_length]; output `logits` float32
[batch_size, sequence_length, vocab_size]. The masked-LM head is BERT's: dense + gelu + LayerNorm,
then the decoder, whose weight is the word embedding matrix (tied) plus its own bias. The sparse
vector is outside the graph: max over tokens of log(1 + relu(logits)), as sentence-transformers'
SpladePooling (pooling_strategy max, activation relu) computes it; the golden leaves the special
tokens ([CLS], [SEP]) and padding out, as the server does.
"""
import numpy as np

import golden
import layers as L
import sizes
from families.bert import E5_SMALL_V2_CONFIG, declare_encoder, encoder_graph, encoder_numpy
from folder import Folder, dump_json, write_model_files
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

DYNAMIC = ["batch_size", "sequence_length"]

SPLADE_CONFIG = dict(E5_SMALL_V2_CONFIG, architectures=["BertForMaskedLM"], hidden_size=768, intermediate_size=3072,
                     num_attention_heads=12, transformers_version="4.41.2", _name_or_path="prithivida/Splade_PP_en_v1")

STANDINS = [
    {
        "repo": "prithivida/Splade_PP_en_v1",
        "task": "sparse",
        "tokenizer": "bert",
        "opset": 14,
        "seed": 1101,
    },
]


def splade_files(vocab_size):
    """sentence-transformers v5 SparseEncoder files: MLMTransformer, then SpladePooling."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
        {"idx": 1, "name": "1", "path": "1_SpladePooling", "type": "sentence_transformers.sparse_encoder.models.SpladePooling"},
    ]
    pooling = {"pooling_strategy": "max", "activation_function": "relu", "word_embedding_dimension": vocab_size}
    return {
        "config.json": dump_json(SPLADE_CONFIG),
        "modules.json": dump_json(modules),
        "1_SpladePooling/config.json": dump_json(pooling),
        "sentence_bert_config.json": dump_json({"max_seq_length": 512, "do_lower_case": False}),
        "config_sentence_transformers.json": dump_json({"model_type": "SparseEncoder", "similarity_fn_name": "dot"}),
    }


def declare_mlm_head(W, cfg):
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    W.linear("cls.predictions.transform.dense", H, H, 1.0 / np.sqrt(H))
    W.norm("cls.predictions.transform.LayerNorm", H)
    # A trained SPLADE head is positive for a few dozen vocabulary entries per token; logits of
    # std ~sqrt(H) shifted by -3.7 std keep the stand-in as sparse (about 3 entries per token).
    W.w["cls.predictions.bias"] = (W.rng.standard_normal(V, dtype=np.float32) * np.float32(0.5)
                                   - np.float32(3.7 * np.sqrt(H)))


def mlm_head_graph(b, cfg, h):
    t = b.act(b.linear(h, "cls.predictions.transform.dense"), cfg["hidden_act"])
    t = b.layer_norm(t, "cls.predictions.transform.LayerNorm", cfg["layer_norm_eps"])
    decoder = b.op("Transpose", [b.p("embeddings.word_embeddings.weight")], perm=[1, 0])
    logits = b.op("MatMul", [t, decoder])
    return b.output("Add", [logits, b.p("cls.predictions.bias")], "logits")


def mlm_head_numpy(W, cfg, h):
    t = L.act(L.linear(W, h, "cls.predictions.transform.dense"), cfg["hidden_act"])
    t = L.layer_norm(W, t, "cls.predictions.transform.LayerNorm", cfg["layer_norm_eps"])
    return t @ W["embeddings.word_embeddings.weight"].T + W["cls.predictions.bias"]


def splade_pool(logits, ids, mask, specials):
    """[B, S, V] logits -> [B, V]: max over real, non-special tokens of log(1 + relu(x))."""
    keep = (mask.astype(bool) & ~np.isin(ids, list(specials)))[..., None]
    return np.where(keep, np.log1p(np.maximum(logits, 0.0)), 0.0).max(1)


def write(standin, out_dir, size, shared_dir):
    window = sizes.window(512, size)
    tok = make_tokenizer(standin["tokenizer"], shared_dir, window)
    files = splade_files(tok.vocab_size)
    cfg = sizes.shrink(SPLADE_CONFIG, size)

    W = L.Weights(standin["seed"])
    declare_encoder(W, cfg)
    declare_mlm_head(W, cfg)
    b = L.Onnx(W, opset=standin["opset"])
    h = encoder_graph(b, cfg, "absolute", "token_type_ids")
    mlm_head_graph(b, cfg, h)

    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b,
             [(name, INT64, DYNAMIC) for name in ("input_ids", "attention_mask", "token_type_ids")],
             [("logits", FLOAT, DYNAMIC + [cfg["vocab_size"]])], opset=standin["opset"])
    del b
    write_model_files(out, files, cfg, window, size)
    out.tokenizer(tok)

    W64 = W.float64()
    specials = set(tok.single([]))

    def sparse(ids, mask, types):
        pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
        return splade_pool(mlm_head_numpy(W64, cfg, encoder_numpy(W64, cfg, ids, mask, types, pos)), ids, mask, specials)

    out.golden(golden.sparse(repo=standin["repo"], family="splade", size=size, tok=tok, window=window, sparse=sparse))
    return {"params": W.params(), "files": out.files}
