"""
Qwen3-Embedding, a decoder embedder with last-token pooling: Qwen/Qwen3-Embedding-0.6B as
onnx-community/Qwen3-Embedding-0.6B-ONNX exports it for Transformers.js.

Export interface (Optimum `feature-extraction-with-past`, as the Transformers.js conversions of
decoders are made): inputs `input_ids` int64 [batch_size, sequence_length], `attention_mask` int64
[batch_size, past_sequence_length + sequence_length], `position_ids` int64 [batch_size,
sequence_length] and, per layer, `past_key_values.{i}.key` / `.value` float32 [batch_size,
num_key_value_heads, past_sequence_length, head_dim]; outputs `last_hidden_state` float32
[batch_size, sequence_length, hidden_size] and `present.{i}.key` / `.value` (past and new keys /
values, after RoPE). An embedder feeds an empty past (past_sequence_length 0). The fp32 export keeps
its weights in onnx/model.onnx_data (2.4 GB), so the stand-in does too, at every size.

Architecture (transformers' Qwen3Model): token embeddings; per layer RMSNorm, q/k/v projections
without bias, per-head RMSNorm of q and k (q_norm, k_norm) before rotate-half RoPE (theta 1e6),
grouped-query attention (head h reads key/value head h // (heads / kv_heads)), causal and padding
mask, o_proj, residual; RMSNorm, SwiGLU MLP down(silu(gate(x)) * up(x)), residual; final RMSNorm.

The tokenizer appends `<|endoftext|>` to every text; sentence-transformers pools that last token and
normalises; queries take the `query` prompt. Those facts are in Qwen/Qwen3-Embedding-0.6B's
modules.json, 1_Pooling/config.json and config_sentence_transformers.json; the Transformers.js
conversion is not known to carry them (its listings show config, generation config, tokenizer files
and onnx/), so the stand-in leaves them out and they come from the catalogue, as they must for the
real repository.
"""
import json

import numpy as np

import golden
import layers as L
import sizes
from folder import Folder, added_token_ids, dump_json, pooling_config, sentence_transformers_modules
from onnx_writer import BOOL, FLOAT, INT32, INT64
from tokenizers import make_tokenizer

QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"

# Qwen/Qwen3-Embedding-0.6B's config.json (transformers 4.51.3), with the Transformers.js export
# facts the onnx-community conversions add.
CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
    "transformers_version": "4.51.3",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151669,
    "transformers.js_config": {
        "use_external_data_format": {"model.onnx": True, "model_fp16.onnx": True},
        "kv_cache_dtype": {"q4f16": "float16", "fp16": "float16"},
    },
}

GENERATION_CONFIG = {"bos_token_id": 151643, "eos_token_id": 151643, "max_new_tokens": 2048,
                     "transformers_version": "4.51.3"}

STANDINS = [
    {
        "repo": "onnx-community/Qwen3-Embedding-0.6B-ONNX",
        "task": "embedding",
        "base_model": "Qwen/Qwen3-Embedding-0.6B",
        "tokenizer": "qwen3",
        "pooling": "lasttoken",
        "normalize": True,
        "prompts": {"query": QUERY_PROMPT, "document": ""},  # Qwen/Qwen3-Embedding-0.6B's
        "sentence_transformers_files": False,
        "max_seq_length": 32768,  # max_position_embeddings; the tokenizer says 131072
        "model_max_length": 131072,
        "matryoshka": [512, 256, 128],  # MRL: any width from 32 to 1024
        "opset": 14,
        "seed": 3001,
    },
]

BATCH = "batch_size"
SEQ = "sequence_length"
PAST = "past_sequence_length"
TOTAL = "past_sequence_length + sequence_length"


def tiny_config(cfg, size):
    """The real config, or the tiny one: sizes.shrink plus the decoder's own width keys
    (key/value heads half the query heads, head_dim twice hidden / heads, as the real model's)."""
    small = sizes.shrink(cfg, size)
    if size == "real":
        return small
    small["num_key_value_heads"] = small["num_attention_heads"] // 2
    small["head_dim"] = 2 * small["hidden_size"] // small["num_attention_heads"]
    small["max_window_layers"] = small["num_hidden_layers"]
    return small


# ---------------------------------------------------------------------------------------------
# Weights, graph, numpy forward
# ---------------------------------------------------------------------------------------------
def declare(W, cfg, vocab_rows):
    H, I, D = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    nq, nkv = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    W.normal("model.embed_tokens.weight", (vocab_rows, H), 1.0)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        W.norm(p + "input_layernorm", H, bias=False)
        W.linear(p + "self_attn.q_proj", H, nq, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "self_attn.k_proj", H, nkv, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "self_attn.v_proj", H, nkv, 1.0 / np.sqrt(H), bias=False)
        W.norm(p + "self_attn.q_norm", D, bias=False)
        W.norm(p + "self_attn.k_norm", D, bias=False)
        W.linear(p + "self_attn.o_proj", nq, H, 1.0 / np.sqrt(nq), bias=False)
        W.norm(p + "post_attention_layernorm", H, bias=False)
        W.linear(p + "mlp.gate_proj", H, I, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "mlp.up_proj", H, I, 1.0 / np.sqrt(H), bias=False)
        W.linear(p + "mlp.down_proj", I, H, 1.0 / np.sqrt(I), bias=False)
    W.norm("model.norm", H, bias=False)


def graph(b, cfg, head=None, cache=True, fused_rows=None):
    """Qwen3Model with a key/value cache in and out; returns (inputs, outputs) value infos. `head(b,
    hidden)` (a causal LM's) writes the graph's first output from the final norm's output and
    returns its value info; without one, that output is `last_hidden_state`. Without `cache` (a
    sequence classifier's export) the graph takes no past and gives no present, and positions are
    0..S-1 (transformers' default when no position ids are given). With `fused_rows`, attention is
    ONNX Runtime's fused GroupQueryAttention with rotary caches of that many positions
    (`fused_attention`)."""
    if fused_rows is not None:
        return fused_attention_graph(b, cfg, head, fused_rows)
    H, D, eps = cfg["hidden_size"], cfg["head_dim"], cfg["rms_norm_eps"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n = cfg["num_hidden_layers"]
    x = b.op("Gather", [b.p("model.embed_tokens.weight"), "input_ids"], axis=0)
    positions = "position_ids"
    if not cache:
        seq = b.squeeze(b.dim("input_ids", 1), [0])
        positions = b.unsqueeze(b.op("Range", [b.i64(0), seq, b.i64(1)]), [0])
    cos, sin = b.rotary_cos_sin(positions, D, cfg["rope_theta"])
    # Query i (at absolute position past + i) sees key j when j <= past + i and key j is not padding.
    past = b.dim("past_key_values.0.key", 2) if cache else b.i64([0])
    total = b.op("Add", [past, b.dim("input_ids", 1)])
    allowed = b.op("And", [b.key_allowed("attention_mask"), b.causal_allowed(total, start=past)])
    bias = b.allowed_to_bias(allowed)
    for i in range(n):
        p = f"model.layers.{i}."
        a = f"{p}self_attn."
        h = b.rms_norm(x, p + "input_layernorm", eps)
        q = b.op("Reshape", [b.linear(h, a + "q_proj", bias=False), b.i64([0, 0, heads, D])])
        q = b.op("Transpose", [b.rms_norm(q, a + "q_norm", eps)], perm=[0, 2, 1, 3])
        k = b.op("Reshape", [b.linear(h, a + "k_proj", bias=False), b.i64([0, 0, kv_heads, D])])
        k = b.op("Transpose", [b.rms_norm(k, a + "k_norm", eps)], perm=[0, 2, 1, 3])
        v = b.split_heads(b.linear(h, a + "v_proj", bias=False), kv_heads, D)
        k = b.rotary(k, cos, sin, D)
        if cache:
            k = b.output("Concat", [f"past_key_values.{i}.key", k], f"present.{i}.key", axis=2)
            v = b.output("Concat", [f"past_key_values.{i}.value", v], f"present.{i}.value", axis=2)
        k = b.repeat_kv(k, kv_heads, heads // kv_heads, D)
        v = b.repeat_kv(v, kv_heads, heads // kv_heads, D)
        ctx = b.attention(b.rotary(q, cos, sin, D), b.op("Transpose", [k], perm=[0, 1, 3, 2]), v, bias, D)
        x = b.op("Add", [x, b.linear(b.merge_heads(ctx, heads * D), a + "o_proj", bias=False)])
        h = b.rms_norm(x, p + "post_attention_layernorm", eps)
        gate = b.silu(b.linear(h, p + "mlp.gate_proj", bias=False))
        up = b.linear(h, p + "mlp.up_proj", bias=False)
        x = b.op("Add", [x, b.linear(b.op("Mul", [gate, up]), p + "mlp.down_proj", bias=False)])
    x = b.rms_norm(x, "model.norm", eps)
    if head is None:
        b.output("Identity", [x], "last_hidden_state")

    outputs = [head(b, x) if head else ("last_hidden_state", FLOAT, [BATCH, SEQ, H])]
    if not cache:
        return [("input_ids", INT64, [BATCH, SEQ]), ("attention_mask", INT64, [BATCH, SEQ])], outputs
    inputs = [("input_ids", INT64, [BATCH, SEQ]), ("attention_mask", INT64, [BATCH, TOTAL]),
              ("position_ids", INT64, [BATCH, SEQ])]
    for i in range(n):
        for part in ("key", "value"):
            inputs.append((f"past_key_values.{i}.{part}", FLOAT, [BATCH, kv_heads, PAST, D]))
            outputs.append((f"present.{i}.{part}", FLOAT, [BATCH, kv_heads, TOTAL, D]))
    return inputs, outputs


def fused_attention_graph(b, cfg, head, rows):
    """The causal LM with ONNX Runtime's fused attention, as the int8 and 4-bit graphs of
    onnx-community/Qwen3-Reranker-0.6B-ONNX (onnxruntime-genai's model builder) lay it out: per layer
    q_proj / k_proj, the per-head q_norm / k_norm (reshaped to heads and back), v_proj, then one
    `com.microsoft.GroupQueryAttention` (do_rotary=1: rotate-half RoPE from `cos_cache` /
    `sin_cache` initializers [positions, head_dim / 2]; present = past and the new keys / values),
    o_proj. Positions come from the attention mask, not from an input: `seqlens_k` is each row's
    attended count less one (int32 [batch]), `total_sequence_length` the mask's width (int32
    scalar); on a prompt (an empty past) row b's tokens sit at 0..S-1, so rows are right-padded.
    Inputs `input_ids`, `attention_mask`, `past_key_values.{i}.*`; outputs as the unfused graph's."""
    H, D, eps = cfg["hidden_size"], cfg["head_dim"], cfg["rms_norm_eps"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n = cfg["num_hidden_layers"]
    x = b.op("Gather", [b.p("model.embed_tokens.weight"), "input_ids"], axis=0)
    attended = b.reduce_sum("attention_mask", [1], keepdims=0)
    seqlens_k = b.op("Cast", [b.op("Sub", [attended, b.i64(1)])], to=INT32)
    total = b.op("Cast", [b.squeeze(b.dim("attention_mask", 1), [0])], to=INT32)
    freqs = np.arange(rows, dtype=np.float64)[:, None] * L.inv_freq(D, cfg["rope_theta"])[None, :]
    cos_cache = b.g.init("cos_cache", np.cos(freqs).astype(np.float32))
    sin_cache = b.g.init("sin_cache", np.sin(freqs).astype(np.float32))
    for i in range(n):
        p = f"model.layers.{i}."
        a = f"{p}self_attn."
        h = b.rms_norm(x, p + "input_layernorm", eps)
        q = b.op("Reshape", [b.linear(h, a + "q_proj", bias=False), b.i64([0, 0, heads, D])])
        q = b.op("Reshape", [b.rms_norm(q, a + "q_norm", eps), b.i64([0, 0, heads * D])])
        k = b.op("Reshape", [b.linear(h, a + "k_proj", bias=False), b.i64([0, 0, kv_heads, D])])
        k = b.op("Reshape", [b.rms_norm(k, a + "k_norm", eps), b.i64([0, 0, kv_heads * D])])
        v = b.linear(h, a + "v_proj", bias=False)
        ctx = b.g.op("GroupQueryAttention",
                     [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k, total,
                      cos_cache, sin_cache],
                     name=f"layers.{i}.attn.GroupQueryAttention",
                     outputs=[f"layers.{i}.attn.output", f"present.{i}.key", f"present.{i}.value"],
                     domain="com.microsoft",
                     attrs=dict(num_heads=heads, kv_num_heads=kv_heads, do_rotary=1, rotary_interleaved=0,
                                scale=float(1.0 / np.sqrt(D))))[0]
        x = b.op("Add", [x, b.linear(ctx, a + "o_proj", bias=False)])
        h = b.rms_norm(x, p + "post_attention_layernorm", eps)
        gate = b.silu(b.linear(h, p + "mlp.gate_proj", bias=False))
        up = b.linear(h, p + "mlp.up_proj", bias=False)
        x = b.op("Add", [x, b.linear(b.op("Mul", [gate, up]), p + "mlp.down_proj", bias=False)])
    x = b.rms_norm(x, "model.norm", eps)
    outputs = [head(b, x)]
    inputs = [("input_ids", INT64, [BATCH, SEQ]), ("attention_mask", INT64, [BATCH, TOTAL])]
    for i in range(n):
        for part in ("key", "value"):
            inputs.append((f"past_key_values.{i}.{part}", FLOAT, [BATCH, kv_heads, PAST, D]))
            outputs.append((f"present.{i}.{part}", FLOAT, [BATCH, kv_heads, TOTAL, D]))
    return inputs, outputs


def forward(W, cfg, input_ids, attention_mask, position_ids):
    """last_hidden_state in float64 (W may hold float32 arrays: every product is taken in float64)."""
    D, eps, theta = cfg["head_dim"], cfg["rms_norm_eps"], cfg["rope_theta"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    B, S = input_ids.shape
    x = W["model.embed_tokens.weight"][input_ids].astype(np.float64)
    allowed = L.allowed_mask(attention_mask, causal=True)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = f"{p}self_attn."
        h = L.rms_norm(W, x, p + "input_layernorm", eps)
        q = L.rms_norm(W, L.linear(W, h, a + "q_proj", bias=False).reshape(B, S, heads, D), a + "q_norm", eps)
        k = L.rms_norm(W, L.linear(W, h, a + "k_proj", bias=False).reshape(B, S, kv_heads, D), a + "k_norm", eps)
        v = L.heads(L.linear(W, h, a + "v_proj", bias=False), kv_heads)
        q = L.rotary(q.transpose(0, 2, 1, 3), position_ids, theta)
        k = L.rotary(k.transpose(0, 2, 1, 3), position_ids, theta)
        rep = heads // kv_heads
        ctx = L.attention(q, np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1), allowed)
        x = x + L.linear(W, L.merge(ctx), a + "o_proj", bias=False)
        h = L.rms_norm(W, x, p + "post_attention_layernorm", eps)
        f = L.silu(L.linear(W, h, p + "mlp.gate_proj", bias=False)) * L.linear(W, h, p + "mlp.up_proj", bias=False)
        x = x + L.linear(W, f, p + "mlp.down_proj", bias=False)
    return L.rms_norm(W, x, "model.norm", eps)


def positions_of(attention_mask):
    """Transformers.js' position ids: cumsum(mask) - 1, padding at 1 (0..n-1 for real tokens
    whichever side is padded)."""
    pos = np.cumsum(attention_mask, axis=1) - 1
    return np.where(attention_mask == 1, pos, 1)


# ---------------------------------------------------------------------------------------------
# The folder
# ---------------------------------------------------------------------------------------------
def model_files(standin, cfg, window, end_id):
    """config.json, generation_config.json and, when the stand-in has them, the sentence-transformers
    files of Qwen/Qwen3-Embedding-0.6B (Transformer, Pooling lasttoken, Normalize; query / document
    prompts)."""
    generation = dict(GENERATION_CONFIG, bos_token_id=end_id, eos_token_id=end_id)
    files = {"config.json": dump_json(cfg), "generation_config.json": dump_json(generation)}
    if standin["sentence_transformers_files"]:
        st = {"prompts": standin["prompts"], "default_prompt_name": None, "similarity_fn_name": "cosine"}
        files.update({
            "modules.json": dump_json(sentence_transformers_modules(True)),
            "1_Pooling/config.json": dump_json(pooling_config(cfg["hidden_size"], "lasttoken", extended=True),
                                               indent=4),
            "sentence_bert_config.json": dump_json({"max_seq_length": window, "do_lower_case": False}, indent=4),
            "config_sentence_transformers.json": dump_json(st, indent=4),
        })
    return files


def write(standin, out_dir, size, shared_dir):
    cfg = tiny_config(CONFIG, size)
    window = sizes.window(standin["max_seq_length"], size)
    tok = make_tokenizer(standin["tokenizer"], shared_dir, standin["model_max_length"] if size == "real" else window)
    rows = CONFIG["vocab_size"] if size == "real" else tok.vocab_size
    assert tok.vocab_size <= rows
    cfg["vocab_size"] = rows
    end_id = added_token_ids(tok.files["tokenizer.json"])["<|endoftext|>"]
    cfg["bos_token_id"] = cfg["eos_token_id"] = end_id

    W = L.Weights(standin["seed"])
    declare(W, cfg, rows)
    b = L.Onnx(W, opset=standin["opset"])
    inputs, outputs = graph(b, cfg)
    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b, inputs, outputs, opset=standin["opset"], external=True)
    del b
    for rel, data in list(model_files(standin, cfg, window, end_id).items()) + list(tok.files.items()):
        out.bytes(rel, data)

    def hidden(ids, mask, _types):
        return forward(W.w, cfg, ids, mask, positions_of(mask))

    dims = sizes.matryoshka(standin["matryoshka"], CONFIG["hidden_size"], cfg["hidden_size"])
    gold, _ = golden.embedding(repo=standin["repo"], family="qwen3", size=size, tok=tok, window=window,
                               hidden=hidden, pooling=standin["pooling"], normalize=standin["normalize"],
                               prompts=standin["prompts"], matryoshka=dims)
    if size == "tiny":  # the same code at either size; at the real size another forward of every row
        check_left_padding(gold, tok, hidden)
    out.golden(gold)
    return {"params": W.params(), "files": out.files}


def check_left_padding(gold, tok, hidden):
    """A left-padded batch with position ids cumsum(mask) - 1 (Hugging Face's own batching of this
    model) pools the same vectors as the right-padded rows of golden.json."""
    rows = [item["input_ids"] for item in gold["embeddings"]]
    ids, mask = golden.pad(rows, tok.pad_id, "left")
    pooled = golden.pool(hidden(ids, mask, None), mask, "lasttoken")
    want = np.array([item["pooled"] for item in gold["embeddings"]])
    diff = float(np.abs(pooled - want).max() / max(1.0, np.abs(want).max()))
    assert diff < 1e-5, f"left padding pools other vectors: {diff}"
