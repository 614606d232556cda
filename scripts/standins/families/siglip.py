"""
SigLIP (SiglipModel) as Transformers.js exports it: Xenova/siglip-base-patch16-224, the two towers as
separate graphs (Transformers.js' scripts/extra/siglip.py: Optimum's SigLIP text config and a ViT
config, each with last_hidden_state and pooler_output; opset 14).

Export interface:
  onnx/text_model.onnx:   `input_ids` int64 [batch_size, sequence_length] (no attention_mask: the model
                          was trained on texts padded with `</s>` to 64 tokens, and padding is attended)
                          -> `last_hidden_state` [batch_size, sequence_length, 768],
                             `pooler_output` [batch_size, 768]
  onnx/vision_model.onnx: `pixel_values` float32 [batch_size, num_channels, height, width]
                          -> `last_hidden_state` [batch_size, 196, 768], `pooler_output` [batch_size, 768]
The vectors are the pooler outputs, unnormalised; SigLIP compares them by cosine (its sigmoid loss
runs on normalised vectors; the logit scale and bias are left out).

Architecture (transformers' modeling_siglip): pre-LN layers as CLIP's, gelu_pytorch_tanh, LayerNorm
eps 1e-6. Text: token + position embeddings (64 positions), the layers without any mask,
final_layer_norm (last_hidden_state), pooled at the last position (`[:, -1]`, hence the fixed
padding), `head` Linear with bias. Vision: patch Conv with bias, position embeddings (no class token),
the layers, post_layernorm (last_hidden_state); the attention-pooling head: a learned probe token
attends over the patches (torch's MultiheadAttention: in-projections with biases, out_proj),
then `x + mlp(layernorm(x))` (fc1, gelu_pytorch_tanh, fc2), its single token is pooler_output.

Tiny: each tower 2 layers, hidden 64, 4 heads, the real FFN ratio, the real image size and patch.
"""
import copy
import math

import numpy as np

import golden
import layers as L
import sizes
from families.clip import declare_layers, layers_graph, layers_numpy, patches_graph, patches_numpy
from folder import Folder
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

# google/siglip-base-patch16-224's config.json (Transformers.js' copy), the towers' defaults written out.
CONFIG = {
    "architectures": ["SiglipModel"],
    "initializer_factor": 1.0,
    "model_type": "siglip",
    "text_config": {
        "attention_dropout": 0.0, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 768, "intermediate_size": 3072,
        "layer_norm_eps": 1e-06, "max_position_embeddings": 64, "model_type": "siglip_text_model",
        "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 1, "bos_token_id": 49406,
        "eos_token_id": 49407, "vocab_size": 32000,
    },
    "torch_dtype": "float32",
    "transformers_version": "4.37.0.dev0",
    "vision_config": {
        "attention_dropout": 0.0, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 768, "image_size": 224,
        "intermediate_size": 3072, "layer_norm_eps": 1e-06, "model_type": "siglip_vision_model",
        "num_attention_heads": 12, "num_channels": 3, "num_hidden_layers": 12, "patch_size": 16,
    },
}

# SiglipImageProcessor: a fixed 224x224 resize (its default resample, bilinear), no crop, 1/255, mean / std 0.5.
PREPROCESSOR = {
    "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "SiglipImageProcessor", "image_std": [0.5, 0.5, 0.5], "processor_class": "SiglipProcessor",
    "resample": 2, "rescale_factor": 0.00392156862745098, "size": {"height": 224, "width": 224},
}

STANDINS = [{"repo": "Xenova/siglip-base-patch16-224", "task": "multimodal", "seed": 3101}]

OPSET = 14
TEXT_LENGTH = 64  # max_position_embeddings: every text is padded (and cut) to it


def processor_steps(pp):
    return {"resize": ("fixed", pp["size"]["height"], pp["size"]["width"]), "resample": pp["resample"],
            "crop": None, "rescale": pp["rescale_factor"], "mean": pp["image_mean"], "std": pp["image_std"]}


def declare(W, cfg, vocab_rows):
    t, v = cfg["text_config"], cfg["vision_config"]
    Ht, Hv = t["hidden_size"], v["hidden_size"]
    W.normal("text_model.embeddings.token_embedding.weight", (vocab_rows, Ht), 1.0)
    W.normal("text_model.embeddings.position_embedding.weight", (t["max_position_embeddings"], Ht), 0.5)
    declare_layers(W, "text_model.", t)
    W.norm("text_model.final_layer_norm", Ht)
    W.linear("text_model.head", Ht, Ht, 1 / math.sqrt(Ht))
    patch = v["patch_size"]
    n = (v["image_size"] // patch) ** 2
    W.normal("vision_model.embeddings.patch_embedding.weight", (Hv, v["num_channels"], patch, patch),
             2.0 / math.sqrt(v["num_channels"] * patch * patch))
    W.normal("vision_model.embeddings.patch_embedding.bias", (Hv,), 0.02)
    W.normal("vision_model.embeddings.position_embedding.weight", (n, Hv), 0.5)
    declare_layers(W, "vision_model.", v)
    W.norm("vision_model.post_layernorm", Hv)
    h = "vision_model.head."
    W.normal(h + "probe", (1, 1, Hv), 1.0)
    for name, std in (("q", 1.5 / math.sqrt(Hv)), ("k", 1.5 / math.sqrt(Hv)), ("v", 1 / math.sqrt(Hv))):
        W.linear(h + f"attention.in_proj_{name}", Hv, Hv, std)  # in_proj_weight's thirds
    W.linear(h + "attention.out_proj", Hv, Hv, 1 / math.sqrt(Hv))
    W.norm(h + "layernorm", Hv)
    W.linear(h + "mlp.fc1", Hv, v["intermediate_size"], 1 / math.sqrt(Hv))
    W.linear(h + "mlp.fc2", v["intermediate_size"], Hv, 1 / math.sqrt(v["intermediate_size"]))


def text_graph(W, cfg):
    t = cfg["text_config"]
    b = L.Onnx(W, opset=OPSET)
    e = "text_model.embeddings."
    x = b.op("Gather", [b.p(e + "token_embedding.weight"), "input_ids"], axis=0)
    seq_len = b.dim("input_ids", 1)
    x = b.op("Add", [x, b.op("Slice", [b.p(e + "position_embedding.weight"), b.i64([0]), seq_len, b.i64([0])])])
    h = layers_graph(b, x, "text_model.", t)
    h = b.output("Identity", [b.layer_norm(h, "text_model.final_layer_norm", t["layer_norm_eps"])], "last_hidden_state")
    last = b.op("Gather", [h, b.i64(-1)], axis=1)
    b.output("Identity", [b.linear(last, "text_model.head")], "pooler_output")
    return b


def pooling_head_graph(b, h, cfg):
    v = cfg["vision_config"]
    H, heads = v["hidden_size"], v["num_attention_heads"]
    D = H // heads
    p = "vision_model.head."
    shape = b.op("Concat", [b.dim("pixel_values", 0), b.i64([1, H])], axis=0)
    probe = b.op("Expand", [b.p(p + "probe"), shape])
    q = b.split_heads(b.linear(probe, p + "attention.in_proj_q"), heads, D)
    k = b.split_heads(b.linear(h, p + "attention.in_proj_k"), heads, D, perm=(0, 2, 3, 1))
    v_ = b.split_heads(b.linear(h, p + "attention.in_proj_v"), heads, D)
    s = b.op("Softmax", [b.op("Div", [b.op("MatMul", [q, k]), b.c(math.sqrt(D))])], axis=-1)
    x = b.linear(b.merge_heads(b.op("MatMul", [s, v_]), H), p + "attention.out_proj")
    f = b.linear(b.layer_norm(x, p + "layernorm", v["layer_norm_eps"]), p + "mlp.fc1")
    x = b.op("Add", [x, b.linear(b.act(f, v["hidden_act"]), p + "mlp.fc2")])
    return b.op("Gather", [x, b.i64(0)], axis=1)


def vision_graph(W, cfg):
    v = cfg["vision_config"]
    b = L.Onnx(W, opset=OPSET)
    e = "vision_model.embeddings."
    x = patches_graph(b, e + "patch_embedding.weight", v["patch_size"], (v["image_size"] // v["patch_size"]) ** 2,
                      e + "patch_embedding.bias")
    x = b.op("Add", [x, b.p(e + "position_embedding.weight")])
    h = layers_graph(b, x, "vision_model.", v)
    h = b.output("Identity", [b.layer_norm(h, "vision_model.post_layernorm", v["layer_norm_eps"])], "last_hidden_state")
    b.output("Identity", [pooling_head_graph(b, h, cfg)], "pooler_output")
    return b


def text_numpy(W, cfg, ids):
    t = cfg["text_config"]
    e = "text_model.embeddings."
    B, S = ids.shape
    x = W[e + "token_embedding.weight"][ids] + W[e + "position_embedding.weight"][:S][None]
    h = layers_numpy(W, x, "text_model.", t, np.ones((B, S, S), bool))
    h = L.layer_norm(W, h, "text_model.final_layer_norm", t["layer_norm_eps"])
    return L.linear(W, h[:, -1], "text_model.head")


def vision_numpy(W, cfg, pixels):
    v = cfg["vision_config"]
    e = "vision_model.embeddings."
    x = patches_numpy(W, pixels, e + "patch_embedding.weight", v["patch_size"], e + "patch_embedding.bias")
    x = x + W[e + "position_embedding.weight"][None]
    B, N, H = x.shape
    h = layers_numpy(W, x, "vision_model.", v, np.ones((B, N, N), bool))
    h = L.layer_norm(W, h, "vision_model.post_layernorm", v["layer_norm_eps"])
    p = "vision_model.head."
    heads = v["num_attention_heads"]
    probe = np.broadcast_to(W[p + "probe"], (B, 1, H))
    q = L.heads(L.linear(W, probe, p + "attention.in_proj_q"), heads)
    k = L.heads(L.linear(W, h, p + "attention.in_proj_k"), heads)
    v_ = L.heads(L.linear(W, h, p + "attention.in_proj_v"), heads)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // heads)
    s = np.exp(s - s.max(-1, keepdims=True))
    x = L.linear(W, L.merge((s / s.sum(-1, keepdims=True)) @ v_), p + "attention.out_proj")
    f = L.linear(W, L.layer_norm(W, x, p + "layernorm", v["layer_norm_eps"]), p + "mlp.fc1")
    x = x + L.linear(W, L.act(f, v["hidden_act"]), p + "mlp.fc2")
    return x[:, 0]


def encode(tok, text):
    """Token ids, `</s>` appended, cut to 64 (the end token kept) and padded with `</s>` to 64."""
    ids = tok.single(tok.encode(text)[: TEXT_LENGTH - tok.single_specials])
    return ids + [tok.pad_id] * (TEXT_LENGTH - len(ids))


def write(standin, out_dir, size, shared_dir):
    cfg = copy.deepcopy(CONFIG)
    if size != "real":
        cfg["text_config"] = sizes.shrink(cfg["text_config"], size)
        cfg["vision_config"] = sizes.shrink(cfg["vision_config"], size)
    tok = make_tokenizer("siglip", shared_dir, TEXT_LENGTH)
    rows = cfg["text_config"]["vocab_size"] if size == "real" else tok.vocab_size
    assert tok.vocab_size <= rows
    cfg["text_config"]["vocab_size"] = rows
    t, v = cfg["text_config"], cfg["vision_config"]
    tokens = (v["image_size"] // v["patch_size"]) ** 2
    assert t["hidden_size"] == v["hidden_size"]  # one vector space, no projections

    W = L.Weights(standin["seed"])
    declare(W, cfg, rows)
    out = Folder(out_dir)
    out.onnx("onnx/text_model.onnx", text_graph(W, cfg), [("input_ids", INT64, ["batch_size", "sequence_length"])],
             [("last_hidden_state", FLOAT, ["batch_size", "sequence_length", t["hidden_size"]]),
              ("pooler_output", FLOAT, ["batch_size", t["hidden_size"]])], opset=OPSET)
    out.onnx("onnx/vision_model.onnx", vision_graph(W, cfg),
             [("pixel_values", FLOAT, ["batch_size", "num_channels", "height", "width"])],
             [("last_hidden_state", FLOAT, ["batch_size", tokens, v["hidden_size"]]),
              ("pooler_output", FLOAT, ["batch_size", v["hidden_size"]])], opset=OPSET)
    out.json("config.json", cfg)
    out.json("preprocessor_config.json", PREPROCESSOR)
    out.tokenizer(tok)

    W64 = W.float64()
    gold = golden.multimodal(
        repo=standin["repo"], family="siglip", size=size, out=out, tok=tok, window=TEXT_LENGTH,
        encode=lambda text: encode(tok, text),
        text_fn=lambda ids, mask: text_numpy(W64, cfg, ids),
        image_fn=lambda pixels: vision_numpy(W64, cfg, pixels),
        processor=processor_steps(PREPROCESSOR), normalize=True, dimensions=v["hidden_size"], vision_tokens=tokens,
        image_size=v["image_size"],
        extra={"graphs": {"text": "onnx/text_model.onnx", "vision": "onnx/vision_model.onnx"},
               "outputs": {"text": "pooler_output", "image": "pooler_output"}, "text_length": TEXT_LENGTH})
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
