"""
NomicBERT (remote-code architecture, `nomic_bert`): nomic-ai/nomic-embed-text-v1.5, which ships its
own onnx/model.onnx.

Export interface (Transformers.js' conversion with the BERT ONNX config, feature-extraction): inputs
`input_ids`, `attention_mask`, `token_type_ids` int64 [batch_size, sequence_length]; output
`last_hidden_state` float32 [batch_size, sequence_length, 768]. Pooling happens outside the graph.

Architecture (nomic-bert-2048's modeling_hf_nomic_bert.py with this config): word + token type
embeddings (no position table), `emb_ln` LayerNorm; 12 post-LN blocks: fused `Wqkv` without bias
(q, k, v blocks in that order), rotate-half RoPE over the whole head (base 1000, not interleaved, no
scaling: `rotary_scaling_factor` null), attention with the padding mask, `out_proj` without bias,
`norm1(x + attn)`; SwiGLU `fc2(fc11(x) * silu(fc12(x)))` without biases, `norm2(x + mlp)`. LayerNorm
eps 1e-12. No final norm.

sentence-transformers: Transformer and mean Pooling, no Normalize. Matryoshka widths 768 / 512 / 256
/ 128 / 64, cut as the model card computes them: `F.layer_norm(embeddings,
normalized_shape=(embeddings.shape[1],))` (no weight or bias, torch's eps 1e-5) over the full
width, then the first d values, then L2 (golden.json's `matryoshka`; `matryoshka_plain` has
sentence-transformers' truncate_dim cuts, without the layer norm, for comparison). Task prefixes
`search_query: ` / `search_document: ` (and `clustering: `, `classification: `) are documented on
the model card; its config_sentence_transformers.json declares no prompts.
"""
import numpy as np

import golden
import layers as L
import sizes
from folder import Folder, dump_json, pooling_config, sentence_transformers_modules
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

BERT_2048 = "nomic-ai/nomic-bert-2048--"

# nomic-ai/nomic-embed-text-v1.5's config.json (a GPT2Config subclass: n_embd, n_layer, ...).
CONFIG = {
    "_name_or_path": "nomic-ai/nomic-bert-2048",
    "activation_function": "swiglu",
    "architectures": ["NomicBertModel"],
    "attn_pdrop": 0.0,
    "auto_map": {
        "AutoConfig": BERT_2048 + "configuration_hf_nomic_bert.NomicBertConfig",
        "AutoModel": BERT_2048 + "modeling_hf_nomic_bert.NomicBertModel",
        "AutoModelForMaskedLM": BERT_2048 + "modeling_hf_nomic_bert.NomicBertForPreTraining",
        "AutoModelForSequenceClassification": BERT_2048 + "modeling_hf_nomic_bert.NomicBertForSequenceClassification",
    },
    "bos_token_id": None,
    "causal": False,
    "dense_seq_output": True,
    "embd_pdrop": 0.0,
    "eos_token_id": None,
    "fused_bias_fc": True,
    "fused_dropout_add_ln": True,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-12,
    "max_trained_positions": 2048,
    "mlp_fc1_bias": False,
    "mlp_fc2_bias": False,
    "model_type": "nomic_bert",
    "n_embd": 768,
    "n_head": 12,
    "n_inner": 3072,
    "n_layer": 12,
    "n_positions": 8192,
    "pad_vocab_size_multiple": 64,
    "parallel_block": False,
    "parallel_block_tied_norm": False,
    "prenorm": False,
    "qkv_proj_bias": False,
    "reorder_and_upcast_attn": False,
    "resid_pdrop": 0.0,
    "rotary_emb_base": 1000,
    "rotary_emb_fraction": 1.0,
    "rotary_emb_interleaved": False,
    "rotary_emb_scale_base": None,
    "rotary_scaling_factor": None,
    "scale_attn_by_inverse_layer_idx": False,
    "scale_attn_weights": True,
    "summary_activation": None,
    "summary_first_dropout": 0.0,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "torch_dtype": "float32",
    "transformers_version": "4.37.2",
    "type_vocab_size": 2,
    "use_cache": True,
    "use_flash_attn": True,
    "use_rms_norm": False,
    "use_xentropy": True,
    "vocab_size": 30528,
}

ST_VERSION = {"__version__": {"sentence_transformers": "2.4.0.dev0", "transformers": "4.37.2",
                              "pytorch": "2.1.0+cu121"}}

STANDINS = [
    {
        "repo": "nomic-ai/nomic-embed-text-v1.5",
        "task": "embedding",
        "tokenizer": "bert",  # bert-base-uncased WordPiece
        "pooling": "mean",
        "normalize": False,
        "prompts": {"query": "search_query: ", "document": "search_document: "},  # the card's prefixes
        "max_seq_length": 8192,
        "matryoshka": [768, 512, 256, 128, 64],
        "before_cut": {"step": "layer-norm", "epsilon": 1e-5},  # the card's recipe
        "opset": 14,
        "seed": 3101,
    },
]

DYNAMIC = ["batch_size", "sequence_length"]
KEYS = {"hidden": "n_embd", "layers": "n_layer", "heads": "n_head", "intermediate": "n_inner"}


# ---------------------------------------------------------------------------------------------
# Weights, graph, numpy forward
# ---------------------------------------------------------------------------------------------
def declare(W, cfg):
    H, I = cfg["n_embd"], cfg["n_inner"]
    W.normal("embeddings.word_embeddings.weight", (cfg["vocab_size"], H), 1.0)
    W.normal("embeddings.token_type_embeddings.weight", (cfg["type_vocab_size"], H), 0.5)
    W.norm("emb_ln", H)
    for i in range(cfg["n_layer"]):
        p = f"encoder.layers.{i}."
        W.linear(p + "attn.Wqkv", H, 3 * H, 1.2 / np.sqrt(H), bias=False)
        W.linear(p + "attn.out_proj", H, H, 1.0 / np.sqrt(H), bias=False)
        W.norm(p + "norm1", H)
        W.linear(p + "mlp.fc11", H, I, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "mlp.fc12", H, I, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "mlp.fc2", I, H, 1.0 / np.sqrt(I), bias=False)
        W.norm(p + "norm2", H)


def graph(b, cfg):
    H, heads, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    D = H // heads
    x = b.op("Gather", [b.p("embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    types = b.op("Gather", [b.p("embeddings.token_type_embeddings.weight"), "token_type_ids"], axis=0)
    h = b.layer_norm(b.op("Add", [x, types]), "emb_ln", eps)
    seq_len = b.squeeze(b.dim("input_ids", 1), [0])
    positions = b.unsqueeze(b.op("Range", [b.i64(0), seq_len, b.i64(1)]), [0])  # [1, S]
    cos, sin = b.rotary_cos_sin(positions, D, cfg["rotary_emb_base"])
    bias = b.padding_bias("attention_mask")
    for i in range(cfg["n_layer"]):
        p = f"encoder.layers.{i}."
        qkv = b.linear(h, p + "attn.Wqkv", bias=False)
        q, k, v = (b.op("Slice", [qkv, b.i64([j * H]), b.i64([(j + 1) * H]), b.i64([-1])]) for j in range(3))
        q = b.rotary(b.split_heads(q, heads, D), cos, sin, D)
        k = b.rotary(b.split_heads(k, heads, D), cos, sin, D)
        ctx = b.attention(q, b.op("Transpose", [k], perm=[0, 1, 3, 2]), b.split_heads(v, heads, D), bias, D)
        attn = b.linear(b.merge_heads(ctx, H), p + "attn.out_proj", bias=False)
        h = b.layer_norm(b.op("Add", [attn, h]), p + "norm1", eps)
        up = b.linear(h, p + "mlp.fc11", bias=False)
        gate = b.silu(b.linear(h, p + "mlp.fc12", bias=False))
        mlp = b.linear(b.op("Mul", [up, gate]), p + "mlp.fc2", bias=False)
        h = b.layer_norm(b.op("Add", [mlp, h]), p + "norm2", eps)
    b.output("Identity", [h], "last_hidden_state")
    inputs = [(name, INT64, DYNAMIC) for name in ("input_ids", "attention_mask", "token_type_ids")]
    return inputs, [("last_hidden_state", FLOAT, DYNAMIC + [H])]


def forward(W, cfg, input_ids, attention_mask, token_type_ids):
    heads, eps, base = cfg["n_head"], cfg["layer_norm_epsilon"], cfg["rotary_emb_base"]
    H = cfg["n_embd"]
    x = W["embeddings.word_embeddings.weight"][input_ids].astype(np.float64)
    h = L.layer_norm(W, x + W["embeddings.token_type_embeddings.weight"][token_type_ids], "emb_ln", eps)
    positions = np.broadcast_to(np.arange(input_ids.shape[1]), input_ids.shape)
    allowed = L.allowed_mask(attention_mask)
    for i in range(cfg["n_layer"]):
        p = f"encoder.layers.{i}."
        qkv = L.linear(W, h, p + "attn.Wqkv", bias=False)
        q, k, v = (L.heads(qkv[..., j * H:(j + 1) * H], heads) for j in range(3))
        ctx = L.attention(L.rotary(q, positions, base), L.rotary(k, positions, base), v, allowed)
        h = L.layer_norm(W, L.linear(W, L.merge(ctx), p + "attn.out_proj", bias=False) + h, p + "norm1", eps)
        f = L.linear(W, h, p + "mlp.fc11", bias=False) * L.silu(L.linear(W, h, p + "mlp.fc12", bias=False))
        h = L.layer_norm(W, L.linear(W, f, p + "mlp.fc2", bias=False) + h, p + "norm2", eps)
    return h


# ---------------------------------------------------------------------------------------------
# The folder
# ---------------------------------------------------------------------------------------------
def model_files(cfg, window):
    return {
        "config.json": dump_json(cfg),
        "modules.json": dump_json(sentence_transformers_modules(False)),
        "1_Pooling/config.json": dump_json(pooling_config(cfg["n_embd"], "mean"), indent=4, newline=False),
        "sentence_bert_config.json": dump_json({"max_seq_length": window, "do_lower_case": False}, indent=4,
                                               newline=False),
        "config_sentence_transformers.json": dump_json(ST_VERSION, indent=4, newline=False),
    }


def write(standin, out_dir, size, shared_dir):
    cfg = sizes.shrink(CONFIG, size, **KEYS)
    window = sizes.window(standin["max_seq_length"], size)
    tok = make_tokenizer(standin["tokenizer"], shared_dir, window)
    assert tok.vocab_size <= cfg["vocab_size"]  # 30522 WordPiece ids, the table padded to a multiple of 64

    W = L.Weights(standin["seed"])
    declare(W, cfg)
    b = L.Onnx(W, opset=standin["opset"])
    inputs, outputs = graph(b, cfg)
    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b, inputs, outputs, opset=standin["opset"])
    del b
    for rel, data in list(model_files(cfg, window).items()) + list(tok.files.items()):
        out.bytes(rel, data)

    def hidden(ids, mask, types):
        return forward(W.w, cfg, ids, mask, types)

    gold, _ = golden.embedding(repo=standin["repo"], family="nomic", size=size, tok=tok, window=window,
                               hidden=hidden, pooling=standin["pooling"], normalize=standin["normalize"],
                               prompts=standin["prompts"],
                               matryoshka=sizes.matryoshka(standin["matryoshka"], CONFIG["n_embd"], cfg["n_embd"]),
                               before_cut=standin["before_cut"])
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
