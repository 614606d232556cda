"""
CLIP (CLIPModel) as Transformers.js exports it: Xenova/clip-vit-base-patch32, -patch16 and
Xenova/clip-vit-large-patch14, the two towers as separate graphs.

Export interface (Optimum's CLIPTextWithProjectionOnnxConfig and a ViT config with CLIP's
vision-with-projection outputs, opset 14; Transformers.js feeds each graph only the inputs it has):
  onnx/text_model.onnx:   `input_ids` int64 [batch_size, sequence_length] (no attention_mask) ->
                          `text_embeds` float32 [batch_size, projection_dim],
                          `last_hidden_state` [batch_size, sequence_length, text hidden]
  onnx/vision_model.onnx: `pixel_values` float32 [batch_size, num_channels, height, width] ->
                          `image_embeds` [batch_size, projection_dim],
                          `last_hidden_state` [batch_size, patches + 1, vision hidden]
Vectors come out unnormalised; CLIP's similarity is the cosine (the logit scale is left out).

Architecture (transformers' modeling_clip): pre-LN layers (layer_norm1, self-attention with biases,
residual; layer_norm2, fc1, quick_gelu, fc2, residual), LayerNorm eps 1e-5.
Text: token + position embeddings, a causal mask and no padding mask, final_layer_norm (that is
last_hidden_state), pooled at the first position of the largest input id (the config's legacy
eos_token_id 2 selects argmax(input_ids); `<|endoftext|>` is the last id of the vocabulary, and
padding with it after the end changes nothing under the causal mask), text_projection (no bias).
Vision: patch Conv (no bias), class embedding, position embeddings, pre_layrnorm, the layers (their
output is last_hidden_state), post_layernorm of the class token, visual_projection (no bias).

Tiny: each tower 2 layers, hidden 64, 4 heads, the real FFN ratio; projection 32; the real image
size and patch, so the vision sequence is the real one (50, 197, 257 tokens).
"""
import copy
import functools
import math

import numpy as np

import golden
import layers as L
import sizes
from folder import Folder
from onnx_writer import FLOAT, INT32, INT64
from tokenizers import make_tokenizer

OPENAI_MEAN = [0.48145466, 0.4578275, 0.40821073]
OPENAI_STD = [0.26862954, 0.26130258, 0.27577711]


def _config(text, vision, projection, name):
    """openai/clip-vit-*'s config.json as transformers 4.x re-saves it (Transformers.js' copy)."""
    text_config = {
        "attention_dropout": 0.0, "bos_token_id": 0, "dropout": 0.0, "eos_token_id": 2,
        "hidden_act": "quick_gelu", "hidden_size": text[0], "initializer_factor": 1.0,
        "initializer_range": 0.02, "intermediate_size": text[1], "layer_norm_eps": 1e-05,
        "max_position_embeddings": 77, "model_type": "clip_text_model", "num_attention_heads": text[2],
        "num_hidden_layers": 12, "pad_token_id": 1, "projection_dim": projection, "vocab_size": 49408,
    }
    vision_config = {
        "attention_dropout": 0.0, "dropout": 0.0, "hidden_act": "quick_gelu", "hidden_size": vision[0],
        "image_size": 224, "initializer_factor": 1.0, "initializer_range": 0.02, "intermediate_size": vision[1],
        "layer_norm_eps": 1e-05, "model_type": "clip_vision_model", "num_attention_heads": vision[2],
        "num_channels": 3, "num_hidden_layers": vision[3], "patch_size": vision[4], "projection_dim": projection,
    }
    return {
        "_name_or_path": name, "architectures": ["CLIPModel"], "initializer_factor": 1.0,
        "logit_scale_init_value": 2.6592, "model_type": "clip", "projection_dim": projection,
        "text_config": text_config, "torch_dtype": "float32", "transformers_version": "4.33.0.dev0",
        "vision_config": vision_config,
    }


# (hidden, intermediate, heads) of the text tower; (hidden, intermediate, heads, layers, patch) of the vision tower.
STANDINS = [
    {"repo": "Xenova/clip-vit-base-patch32", "task": "multimodal", "seed": 3001,
     "config": _config((512, 2048, 8), (768, 3072, 12, 12, 32), 512, "openai/clip-vit-base-patch32")},
    {"repo": "Xenova/clip-vit-base-patch16", "task": "multimodal", "seed": 3002,
     "config": _config((512, 2048, 8), (768, 3072, 12, 12, 16), 512, "openai/clip-vit-base-patch16")},
    {"repo": "Xenova/clip-vit-large-patch14", "task": "multimodal", "seed": 3003,
     "config": _config((768, 3072, 12), (1024, 4096, 16, 24, 14), 768, "openai/clip-vit-large-patch14")},
]

OPSET = 14
WINDOW = 77  # max_position_embeddings; the tokenizer's model_max_length


def preprocessor_config(size=224):
    """CLIPImageProcessor: shortest edge to 224 (bicubic), centre crop 224, 1/255, OpenAI mean / std."""
    return {
        "crop_size": {"height": size, "width": size}, "do_center_crop": True, "do_convert_rgb": True,
        "do_normalize": True, "do_rescale": True, "do_resize": True, "feature_extractor_type": "CLIPFeatureExtractor",
        "image_mean": OPENAI_MEAN, "image_processor_type": "CLIPImageProcessor", "image_std": OPENAI_STD,
        "resample": 3, "rescale_factor": 0.00392156862745098, "size": {"shortest_edge": size},
    }


def processor_steps(pp):
    """images.pixel_values' description of a CLIPImageProcessor config."""
    crop = pp["crop_size"]
    return {"resize": ("shortest_edge", pp["size"]["shortest_edge"]), "resample": pp["resample"],
            "crop": (crop["height"], crop["width"]), "crop_rounding": "floor", "rescale": pp["rescale_factor"],
            "mean": pp["image_mean"], "std": pp["image_std"]}


# ---------------------------------------------------------------------------------------------
# Pre-LN transformer layers (CLIP / SigLIP naming): weights, graph, numpy
# ---------------------------------------------------------------------------------------------
def declare_layers(W, prefix, cfg):
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layers.{i}."
        W.norm(p + "layer_norm1", H)
        for name, std in (("q_proj", 1.5 / math.sqrt(H)), ("k_proj", 1.5 / math.sqrt(H)), ("v_proj", 1 / math.sqrt(H)),
                          ("out_proj", 1 / math.sqrt(H))):
            W.linear(p + "self_attn." + name, H, H, std)
        W.norm(p + "layer_norm2", H)
        W.linear(p + "mlp.fc1", H, I, 1 / math.sqrt(H))
        W.linear(p + "mlp.fc2", I, H, 1 / math.sqrt(I))


def act_graph(b, x, kind):
    if kind == "quick_gelu":  # x * sigmoid(1.702 x)
        return b.op("Mul", [x, b.op("Sigmoid", [b.op("Mul", [x, b.c(1.702)])])])
    return b.act(x, kind)


def act_numpy(x, kind):
    if kind == "quick_gelu":
        return x / (1.0 + np.exp(-1.702 * x))
    return L.act(x, kind)


def attention_graph(b, x, prefix, heads, head_dim, bias=None):
    """Self-attention over x [B, S, H]; `bias` an additive mask broadcast to [B, heads, S, S], or None."""
    H = heads * head_dim
    q = b.split_heads(b.linear(x, prefix + "q_proj"), heads, head_dim)
    k = b.split_heads(b.linear(x, prefix + "k_proj"), heads, head_dim, perm=(0, 2, 3, 1))
    v = b.split_heads(b.linear(x, prefix + "v_proj"), heads, head_dim)
    s = b.op("Div", [b.op("MatMul", [q, k]), b.c(math.sqrt(head_dim))])
    if bias is not None:
        s = b.op("Add", [s, bias])
    ctx = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
    return b.linear(b.merge_heads(ctx, H), prefix + "out_proj")


def layers_graph(b, h, prefix, cfg, bias=None):
    heads = cfg["num_attention_heads"]
    D = cfg["hidden_size"] // heads
    eps = cfg["layer_norm_eps"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layers.{i}."
        a = attention_graph(b, b.layer_norm(h, p + "layer_norm1", eps), p + "self_attn.", heads, D, bias)
        h = b.op("Add", [h, a])
        f = b.linear(b.layer_norm(h, p + "layer_norm2", eps), p + "mlp.fc1")
        h = b.op("Add", [h, b.linear(act_graph(b, f, cfg["hidden_act"]), p + "mlp.fc2")])
    return h


def layers_numpy(W, h, prefix, cfg, allowed):
    """The same layers in float64; `allowed` bool [B, S, S]."""
    heads = cfg["num_attention_heads"]
    eps = cfg["layer_norm_eps"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layers.{i}."
        x = L.layer_norm(W, h, p + "layer_norm1", eps)
        q, k, v = (L.heads(L.linear(W, x, p + f"self_attn.{n}_proj"), heads) for n in "qkv")
        h = h + L.linear(W, L.merge(L.attention(q, k, v, allowed)), p + "self_attn.out_proj")
        x = L.layer_norm(W, h, p + "layer_norm2", eps)
        h = h + L.linear(W, act_numpy(L.linear(W, x, p + "mlp.fc1"), cfg["hidden_act"]), p + "mlp.fc2")
    return h


def all_allowed(batch, seq):
    return np.ones((batch, seq, seq), bool)


# ---------------------------------------------------------------------------------------------
# Patch embeddings (a ViT's Conv with stride = kernel = patch)
# ---------------------------------------------------------------------------------------------
def patches_graph(b, weight, patch, count, bias=None):
    """pixel_values [B, C, H, W] -> [B, count, hidden] (row-major patch order). The count is spelled
    out, so that an empty batch reshapes too (a graph with both towers gets one for the idle tower)."""
    x = b.op("Conv", ["pixel_values", b.p(weight)] + ([b.p(bias)] if bias else []),
             kernel_shape=[patch, patch], strides=[patch, patch])
    x = b.op("Reshape", [x, b.i64([0, 0, count])])
    return b.op("Transpose", [x], perm=[0, 2, 1])


def patches_numpy(W, pixels, weight, patch, bias=None):
    """The same as patch vectors times the flattened kernel, in float64."""
    B, C, H, Wd = pixels.shape
    gh, gw = H // patch, Wd // patch
    x = pixels[:, :, :gh * patch, :gw * patch].reshape(B, C, gh, patch, gw, patch)
    x = x.transpose(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, C * patch * patch)
    k = W[weight]
    y = x @ k.reshape(k.shape[0], -1).T
    return y + W[bias] if bias else y


# ---------------------------------------------------------------------------------------------
# CLIP's towers
# ---------------------------------------------------------------------------------------------
def declare(W, cfg, vocab_rows):
    t, v = cfg["text_config"], cfg["vision_config"]
    Ht, Hv, P = t["hidden_size"], v["hidden_size"], cfg["projection_dim"]
    W.normal("text_model.embeddings.token_embedding.weight", (vocab_rows, Ht), 1.0)
    W.normal("text_model.embeddings.position_embedding.weight", (t["max_position_embeddings"], Ht), 0.5)
    declare_layers(W, "text_model.", t)
    W.norm("text_model.final_layer_norm", Ht)
    W.normal("text_projection.weight", (Ht, P), 1 / math.sqrt(Ht))
    patch = v["patch_size"]
    n = (v["image_size"] // patch) ** 2
    W.normal("vision_model.embeddings.class_embedding", (Hv,), 1.0)
    W.normal("vision_model.embeddings.patch_embedding.weight", (Hv, v["num_channels"], patch, patch),
             2.0 / math.sqrt(v["num_channels"] * patch * patch))
    W.normal("vision_model.embeddings.position_embedding.weight", (n + 1, Hv), 0.5)
    W.norm("vision_model.pre_layrnorm", Hv)
    declare_layers(W, "vision_model.", v)
    W.norm("vision_model.post_layernorm", Hv)
    W.normal("visual_projection.weight", (Hv, P), 1 / math.sqrt(Hv))


def text_graph(W, cfg):
    t = cfg["text_config"]
    b = L.Onnx(W, opset=OPSET)
    e = "text_model.embeddings."
    x = b.op("Gather", [b.p(e + "token_embedding.weight"), "input_ids"], axis=0)
    seq_len = b.dim("input_ids", 1)
    x = b.op("Add", [x, b.op("Slice", [b.p(e + "position_embedding.weight"), b.i64([0]), seq_len, b.i64([0])])])
    causal = b.allowed_to_bias(b.causal_allowed(seq_len))
    h = layers_graph(b, x, "text_model.", t, causal)
    h = b.output("Identity", [b.layer_norm(h, "text_model.final_layer_norm", t["layer_norm_eps"])], "last_hidden_state")
    # last_hidden_state[arange(B), input_ids.to(int).argmax(-1)]
    eos = b.op("ArgMax", [b.op("Cast", ["input_ids"], to=INT32)], axis=-1, keepdims=0)
    pooled = b.op("GatherND", [h, b.unsqueeze(eos, [1])], batch_dims=1)
    b.output("MatMul", [pooled, b.p("text_projection.weight")], "text_embeds")
    return b


def vision_graph(W, cfg):
    v = cfg["vision_config"]
    Hv = v["hidden_size"]
    b = L.Onnx(W, opset=OPSET)
    e = "vision_model.embeddings."
    x = patches_graph(b, e + "patch_embedding.weight", v["patch_size"], (v["image_size"] // v["patch_size"]) ** 2)
    shape = b.op("Concat", [b.dim("pixel_values", 0), b.i64([1, Hv])], axis=0)
    cls = b.op("Expand", [b.op("Reshape", [b.p(e + "class_embedding"), b.i64([1, 1, Hv])]), shape])
    x = b.op("Add", [b.op("Concat", [cls, x], axis=1), b.p(e + "position_embedding.weight")])
    h = b.layer_norm(x, "vision_model.pre_layrnorm", v["layer_norm_eps"])
    h = b.output("Identity", [layers_graph(b, h, "vision_model.", v)], "last_hidden_state")
    pooled = b.layer_norm(b.op("Gather", [h, b.i64(0)], axis=1), "vision_model.post_layernorm", v["layer_norm_eps"])
    b.output("MatMul", [pooled, b.p("visual_projection.weight")], "image_embeds")
    return b


def text_numpy(W, cfg, ids):
    t = cfg["text_config"]
    e = "text_model.embeddings."
    B, S = ids.shape
    x = W[e + "token_embedding.weight"][ids] + W[e + "position_embedding.weight"][:S][None]
    allowed = L.allowed_mask(np.ones((B, S), np.int64), causal=True)
    h = L.layer_norm(W, layers_numpy(W, x, "text_model.", t, allowed), "text_model.final_layer_norm", t["layer_norm_eps"])
    pooled = h[np.arange(B), ids.argmax(-1)]
    return pooled @ W["text_projection.weight"]


def vision_numpy(W, cfg, pixels):
    v = cfg["vision_config"]
    e = "vision_model.embeddings."
    x = patches_numpy(W, pixels, e + "patch_embedding.weight", v["patch_size"])
    B = x.shape[0]
    cls = np.broadcast_to(W[e + "class_embedding"], (B, 1, x.shape[2]))
    x = np.concatenate([cls, x], 1) + W[e + "position_embedding.weight"][None]
    h = L.layer_norm(W, x, "vision_model.pre_layrnorm", v["layer_norm_eps"])
    h = layers_numpy(W, h, "vision_model.", v, all_allowed(B, h.shape[1]))
    pooled = L.layer_norm(W, h[:, 0], "vision_model.post_layernorm", v["layer_norm_eps"])
    return pooled @ W["visual_projection.weight"]


def tiny_config(real, size):
    cfg = copy.deepcopy(real)
    if size == "real":
        return cfg
    cfg["text_config"] = sizes.shrink(cfg["text_config"], size)
    cfg["vision_config"] = sizes.shrink(cfg["vision_config"], size)
    projection = sizes.TINY_PROJECTION
    cfg["projection_dim"] = cfg["text_config"]["projection_dim"] = cfg["vision_config"]["projection_dim"] = projection
    return cfg


@functools.lru_cache(maxsize=None)
def _tokenizer(shared_dir):
    # training the BPE takes seconds: once for the three repositories
    return make_tokenizer("clip", shared_dir, WINDOW)


def truncate(tok, text, window):
    """Token ids with `<|startoftext|>` and `<|endoftext|>`, cut to the window (the end token kept)."""
    return tok.single(tok.encode(text)[: window - tok.single_specials])


def write(standin, out_dir, size, shared_dir):
    cfg = tiny_config(standin["config"], size)
    tok = _tokenizer(shared_dir)
    rows = cfg["text_config"]["vocab_size"] if size == "real" else tok.vocab_size
    assert tok.vocab_size <= rows
    cfg["text_config"]["vocab_size"] = rows
    v = cfg["vision_config"]
    tokens = (v["image_size"] // v["patch_size"]) ** 2 + 1

    W = L.Weights(standin["seed"])
    declare(W, cfg, rows)
    out = Folder(out_dir)
    out.onnx("onnx/text_model.onnx", text_graph(W, cfg), [("input_ids", INT64, ["batch_size", "sequence_length"])],
             [("text_embeds", FLOAT, ["batch_size", cfg["projection_dim"]]),
              ("last_hidden_state", FLOAT, ["batch_size", "sequence_length", cfg["text_config"]["hidden_size"]])],
             opset=OPSET)
    out.onnx("onnx/vision_model.onnx", vision_graph(W, cfg),
             [("pixel_values", FLOAT, ["batch_size", "num_channels", "height", "width"])],
             [("image_embeds", FLOAT, ["batch_size", cfg["projection_dim"]]),
              ("last_hidden_state", FLOAT, ["batch_size", tokens, v["hidden_size"]])], opset=OPSET)
    out.json("config.json", cfg)
    pp = preprocessor_config(v["image_size"])
    out.json("preprocessor_config.json", pp)
    out.tokenizer(tok)

    W64 = W.float64()
    gold = golden.multimodal(
        repo=standin["repo"], family="clip", size=size, out=out, tok=tok, window=WINDOW,
        encode=lambda text: truncate(tok, text, WINDOW),
        text_fn=lambda ids, mask: text_numpy(W64, cfg, ids),
        image_fn=lambda pixels: vision_numpy(W64, cfg, pixels),
        processor=processor_steps(pp), normalize=True, dimensions=cfg["projection_dim"], vision_tokens=tokens,
        image_size=v["image_size"],
        extra={"graphs": {"text": "onnx/text_model.onnx", "vision": "onnx/vision_model.onnx"},
               "outputs": {"text": "text_embeds", "image": "image_embeds"}})
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
