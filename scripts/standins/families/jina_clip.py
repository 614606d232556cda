"""
jina-clip-v2 (remote-code JinaCLIPModel): jinaai/jina-clip-v2, whose `onnx/model.onnx` holds both towers.

Export interface (as Transformers.js' JinaCLIPModel feeds it: both inputs are required, so a call for
one modality passes a dummy of the other, an empty pixel batch or one-token texts; no attention
mask, the text tower masks the padding id itself):
  inputs:  `input_ids` int64 [text_batch_size, sequence_length],
           `pixel_values` float32 [image_batch_size, num_channels, height, width]
  outputs: `text_embeddings` [text_batch_size, 1024], `image_embeddings` [image_batch_size, 1024],
           `l2norm_text_embeddings`, `l2norm_image_embeddings` (the same, L2-normalised)
The weights are in `onnx/model.onnx_data` (config.json's `transformers.js_config` says
`use_external_data_format`), at every size here.

Simplified, the interface kept: the real text tower is jina-embeddings-v3 (XLM-RoBERTa with rotary
positions and a merged LoRA adapter), here the XLM-R encoder with absolute positions (as xlmr.py),
mean-pooled over the tokens that are not `<pad>`; the real vision tower is EVA02-L (rotary 2-D
positions, SwiGLU, sub-LN), here CLIP's pre-LN ViT (class token, quick_gelu) with the real patch (14)
and image size (512), so the vision sequence is the real 36 x 36 + 1 = 1297 tokens; the pooled class
token goes through a final LayerNorm, with no projection (`proj_type: null`, both towers 1024 wide).

Image processor (JinaCLIPImageProcessor, open_clip's eval transform): torchvision Resize(512,
bicubic) of the shortest edge, CenterCrop(512) with offsets int(round((h - 512) / 2)), convert("RGB"),
ToTensor (1/255), Normalize (OpenAI mean / std). The model's own entry points (JinaCLIPModel's
encode_image and the sentence-transformers module's tokenize) convert every image to RGB before
they call the processor, so the transform always gets RGB: an image with alpha has it dropped before
the resize, as transformers' load_image does (the transform's own convert is then a no-op).

Text: the XLM-R tokenizer; queries take the instruction "Represent the query for retrieving
evidence documents: " (config.json's task_instructions for retrieval.query), documents and images
none. Matryoshka widths 1024 ... 32; vectors are cut as sentence-transformers' truncate_dim does.
"""
import copy
import math

import numpy as np

import golden
import layers as L
import sizes
from families.bert import declare_encoder, encoder_graph, encoder_numpy
from families.clip import OPENAI_MEAN, OPENAI_STD, declare_layers, layers_graph, layers_numpy, patches_graph, \
    patches_numpy
from folder import Folder
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

QUERY_INSTRUCTION = "Represent the query for retrieving evidence documents: "
PADDING_IDX = 1
WINDOW = 8192

# jinaai/jina-clip-v2's config.json.
CONFIG = {
    "add_projections": False,
    "architectures": ["JinaCLIPModel"],
    "auto_map": {
        "AutoConfig": "jinaai/jina-clip-implementation--configuration_clip.JinaCLIPConfig",
        "AutoModel": "jinaai/jina-clip-implementation--modeling_clip.JinaCLIPModel",
    },
    "initializer_factor": 1.0,
    "logit_scale_init_value": 2.6592,
    "matryoshka_dimensions": [32, 64, 128, 256, 512, 768, 1024],
    "model_type": "jina_clip",
    "projection_dim": 1024,
    "text_config": {
        "default_instruction_task": None,
        "default_lora_task": "retrieval.query",
        "embed_dim": 1024,
        "hf_model_config_kwargs": {
            "load_trained_adapters": False,
            "lora_adaptations": ["retrieval.query"],
            "lora_alpha": 4,
            "lora_dropout_p": 0.0,
            "lora_main_params_trainable": False,
            "lora_rank": 4,
            "task_instructions": {"retrieval.query": QUERY_INSTRUCTION},
            "use_flash_attn": False,
        },
        "hf_model_name_or_path": "jinaai/jina-embeddings-v3",
        "model_type": "jina_clip_text",
        "pooler_type": "mean_pooler",
        "proj_bias": False,
        "proj_type": None,
    },
    "torch_dtype": "float32",
    "transformers.js_config": {"use_external_data_format": {"model.onnx": True}},
    "truncate_dim": None,
    "use_text_flash_attn": None,
    "use_vision_xformers": None,
    "vision_config": {
        "embed_dim": 1024,
        "fused_layer_norm": False,
        "head_width": 64,
        "image_size": 512,
        "intp_freq": True,
        "layers": 24,
        "ls_init_value": None,
        "mlp_ratio": 2.6667,
        "model_type": "jina_clip_vision",
        "naive_swiglu": True,
        "patch_dropout": 0.1,
        "patch_size": 14,
        "post_norm": False,
        "proj_type": None,
        "pt_hw_seq_len": 16,
        "qkv_bias": True,
        "rope_embeddings": True,
        "subln": True,
        "width": 1024,
        "x_attention": False,
    },
}

PREPROCESSOR = {
    "auto_map": {
        "AutoImageProcessor": "jinaai/jina-clip-implementation--processing_clip.JinaCLIPImageProcessor",
        "AutoProcessor": "jinaai/jina-clip-implementation--processing_clip.JinaCLIPProcessor",
    },
    "fill_color": 0,
    "image_processor_type": "JinaCLIPImageProcessor",
    "interpolation": "bicubic",
    "mean": OPENAI_MEAN,
    "processor_class": "JinaCLIPProcessor",
    "resize_mode": "shortest",
    "size": 512,
    "std": OPENAI_STD,
}

STANDINS = [{"repo": "jinaai/jina-clip-v2", "task": "multimodal", "seed": 3201}]

OPSET = 17
# jina-embeddings-v3's encoder (XLM-RoBERTa large); the towers' sizes as the stand-in's graph uses them.
TEXT = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
        "hidden_act": "gelu", "layer_norm_eps": 1e-05, "type_vocab_size": 1, "max_position_embeddings": WINDOW + 2}
VISION = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 2730,
          "hidden_act": "quick_gelu", "layer_norm_eps": 1e-06, "image_size": 512, "patch_size": 14, "num_channels": 3}


def processor_steps(pp):
    return {"resize": ("shortest_edge", pp["size"]), "resample": 3, "crop": (pp["size"], pp["size"]),
            "crop_rounding": "round", "rescale": 1 / 255, "mean": pp["mean"], "std": pp["std"]}


def towers(size, vocab_rows):
    text, vision = dict(TEXT), dict(VISION)
    if size != "real":
        text, vision = sizes.shrink(text, size), sizes.shrink(vision, size)
        text["max_position_embeddings"] = sizes.window(WINDOW, size) + PADDING_IDX + 1
    text["vocab_size"] = vocab_rows
    return text, vision


def declare(W, text, vision):
    declare_encoder(W, text, prefix="text_model.")
    Hv, patch = vision["hidden_size"], vision["patch_size"]
    n = (vision["image_size"] // patch) ** 2
    W.normal("vision_model.embeddings.class_embedding", (Hv,), 1.0)
    W.normal("vision_model.embeddings.patch_embedding.weight", (Hv, vision["num_channels"], patch, patch),
             2.0 / math.sqrt(vision["num_channels"] * patch * patch))
    W.normal("vision_model.embeddings.patch_embedding.bias", (Hv,), 0.02)
    W.normal("vision_model.embeddings.position_embedding.weight", (n + 1, Hv), 0.5)
    declare_layers(W, "vision_model.", vision)
    W.norm("vision_model.norm", Hv)


def l2norm_graph(b, x, name):
    norm = b.op("ReduceL2", [x], axes=[-1], keepdims=1)
    return b.output("Div", [x, b.op("Max", [norm, b.c(1e-12)])], name)


def graph(W, text, vision):
    b = L.Onnx(W, opset=OPSET)
    # Text: the mask is the tokens that are not <pad> (the tower derives it; the graph takes no mask).
    b.g.op("Cast", [b.op("Not", [b.op("Equal", ["input_ids", b.i64(PADDING_IDX)])])], attrs={"to": INT64},
           outputs=["attention_mask"])
    positions = b.padded_positions("input_ids", PADDING_IDX)
    h = encoder_graph(b, text, positions, None, prefix="text_model.")
    mask = b.unsqueeze(b.op("Cast", ["attention_mask"], to=FLOAT), [-1])
    total = b.reduce_sum(b.op("Mul", [h, mask]), [1], keepdims=0)
    count = b.op("Max", [b.reduce_sum(mask, [1], keepdims=0), b.c(1e-9)])
    t = b.output("Div", [total, count], "text_embeddings")
    l2norm_graph(b, t, "l2norm_text_embeddings")
    # Vision
    Hv = vision["hidden_size"]
    e = "vision_model.embeddings."
    count = (vision["image_size"] // vision["patch_size"]) ** 2
    x = patches_graph(b, e + "patch_embedding.weight", vision["patch_size"], count, e + "patch_embedding.bias")
    shape = b.op("Concat", [b.dim("pixel_values", 0), b.i64([1, Hv])], axis=0)
    cls = b.op("Expand", [b.op("Reshape", [b.p(e + "class_embedding"), b.i64([1, 1, Hv])]), shape])
    x = b.op("Add", [b.op("Concat", [cls, x], axis=1), b.p(e + "position_embedding.weight")])
    x = layers_graph(b, x, "vision_model.", vision)
    pooled = b.layer_norm(b.op("Gather", [x, b.i64(0)], axis=1), "vision_model.norm", vision["layer_norm_eps"])
    v = b.output("Identity", [pooled], "image_embeddings")
    l2norm_graph(b, v, "l2norm_image_embeddings")
    return b


def text_numpy(W, text, ids):
    mask = (ids != PADDING_IDX).astype(np.int64)
    h = encoder_numpy(W, text, ids, mask, np.zeros_like(ids), L.padded_positions(ids, PADDING_IDX), prefix="text_model.")
    m = mask[..., None].astype(np.float64)
    return (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)


def vision_numpy(W, vision, pixels):
    e = "vision_model.embeddings."
    x = patches_numpy(W, pixels, e + "patch_embedding.weight", vision["patch_size"], e + "patch_embedding.bias")
    B, N, H = x.shape
    cls = np.broadcast_to(W[e + "class_embedding"], (B, 1, H))
    x = np.concatenate([cls, x], 1) + W[e + "position_embedding.weight"][None]
    x = layers_numpy(W, x, "vision_model.", vision, np.ones((B, N + 1, N + 1), bool))
    return L.layer_norm(W, x[:, 0], "vision_model.norm", vision["layer_norm_eps"])


def write(standin, out_dir, size, shared_dir):
    window = sizes.window(WINDOW, size)
    tok = make_tokenizer("xlmr", shared_dir, window)
    text, vision = towers(size, 250002 if size == "real" else tok.vocab_size)
    assert tok.vocab_size <= text["vocab_size"]
    dims = vision["hidden_size"]
    assert text["hidden_size"] == dims  # no projections: one vector space
    cfg = copy.deepcopy(CONFIG)
    if size != "real":
        cfg["projection_dim"] = cfg["text_config"]["embed_dim"] = cfg["vision_config"]["embed_dim"] = dims
        cfg["vision_config"].update(width=dims, layers=vision["num_hidden_layers"],
                                    head_width=dims // vision["num_attention_heads"])
    matryoshka = sizes.matryoshka(CONFIG["matryoshka_dimensions"][::-1], CONFIG["projection_dim"], dims)
    cfg["matryoshka_dimensions"] = sorted(matryoshka)
    tokens = (vision["image_size"] // vision["patch_size"]) ** 2 + 1

    W = L.Weights(standin["seed"])
    declare(W, text, vision)
    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", graph(W, text, vision),
             [("input_ids", INT64, ["text_batch_size", "sequence_length"]),
              ("pixel_values", FLOAT, ["image_batch_size", "num_channels", "height", "width"])],
             [("text_embeddings", FLOAT, ["text_batch_size", dims]), ("image_embeddings", FLOAT, ["image_batch_size", dims]),
              ("l2norm_text_embeddings", FLOAT, ["text_batch_size", dims]),
              ("l2norm_image_embeddings", FLOAT, ["image_batch_size", dims])],
             opset=OPSET, external=True)
    out.json("config.json", cfg, indent=4)
    out.json("preprocessor_config.json", PREPROCESSOR, indent=4)
    out.tokenizer(tok)

    W64 = W.float64()
    gold = golden.multimodal(
        repo=standin["repo"], family="jina_clip", size=size, out=out, tok=tok, window=window,
        encode=lambda t: tok.single(tok.encode(t)[: window - tok.single_specials]),
        text_fn=lambda ids, mask: text_numpy(W64, text, ids),
        image_fn=lambda pixels: vision_numpy(W64, vision, pixels),
        processor=processor_steps(PREPROCESSOR), normalize=True, dimensions=dims, vision_tokens=tokens,
        image_size=vision["image_size"], prompts={"retrieval.query": QUERY_INSTRUCTION}, matryoshka=matryoshka,
        extra={"graphs": {"text": "onnx/model.onnx", "vision": "onnx/model.onnx"},
               "outputs": {"text": "text_embeddings", "image": "image_embeddings",
                           "text_normalized": "l2norm_text_embeddings", "image_normalized": "l2norm_image_embeddings"}})
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
