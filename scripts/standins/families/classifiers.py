"""
Sequence classifiers on the BERT encoder (bert.py), as transformers.js's ONNX exports lay them out:
inputs int64 [batch_size, sequence_length], output `logits` float32 [batch_size, num_labels].

* Xenova/toxic-bert (unitary/toxic-bert): BertForSequenceClassification, six labels of the Jigsaw
  toxic comment challenge, `problem_type: multi_label_classification` (a sigmoid per label);
  logits = classifier(tanh(pooler(h[:, 0]))). Inputs input_ids, attention_mask, token_type_ids.
* Xenova/distilbert-base-uncased-finetuned-sst-2-english: DistilBertForSequenceClassification,
  NEGATIVE / POSITIVE (softmax); logits = classifier(relu(pre_classifier(h[:, 0]))). Inputs
  input_ids, attention_mask (DistilBERT has no token types). Its encoder is BERT's post-LN layers
  with no token type table (here: a table of one zero row, which adds nothing).

Both use the bert-base-uncased WordPiece vocabulary (the `bert` tokenizer kind). Their config.json
files are rebuilt from the models' published configurations (labels, sizes, problem_type), not
copied byte for byte: no copy of them is among the shared hub files.
"""
import json

import numpy as np

import golden
import layers as L
import sizes
from families.bert import declare_encoder, encoder_graph, encoder_numpy
from folder import Folder, dump_json
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

DYNAMIC = ["batch_size", "sequence_length"]

TOXIC_LABELS = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
TOXIC_BERT_CONFIG = {
    "_name_or_path": "unitary/toxic-bert",
    "architectures": ["BertForSequenceClassification"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "id2label": {str(i): label for i, label in enumerate(TOXIC_LABELS)},
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "label2id": {label: i for i, label in enumerate(TOXIC_LABELS)},
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "problem_type": "multi_label_classification",
    "transformers_version": "4.29.2",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}

SST2_CONFIG = {
    "_name_or_path": "distilbert-base-uncased-finetuned-sst-2-english",
    "activation": "gelu",
    "architectures": ["DistilBertForSequenceClassification"],
    "attention_dropout": 0.1,
    "dim": 768,
    "dropout": 0.1,
    "finetuning_task": "sst-2",
    "hidden_dim": 3072,
    "id2label": {"0": "NEGATIVE", "1": "POSITIVE"},
    "initializer_range": 0.02,
    "label2id": {"NEGATIVE": 0, "POSITIVE": 1},
    "max_position_embeddings": 512,
    "model_type": "distilbert",
    "n_heads": 12,
    "n_layers": 6,
    "output_past": True,
    "pad_token_id": 0,
    "qa_dropout": 0.1,
    "seq_classif_dropout": 0.2,
    "sinusoidal_pos_embds": False,
    "tie_weights_": True,
    "transformers_version": "4.29.2",
    "vocab_size": 30522,
}

STANDINS = [
    {"repo": "Xenova/toxic-bert", "task": "classify", "arch": "bert", "config": TOXIC_BERT_CONFIG,
     "activation": "sigmoid", "opset": 14, "seed": 3001},
    {"repo": "Xenova/distilbert-base-uncased-finetuned-sst-2-english", "task": "classify", "arch": "distilbert",
     "config": SST2_CONFIG, "activation": "softmax", "opset": 14, "seed": 3002},
]


def encoder_config(standin, size):
    """(the config.json to write, the BERT-encoder config the graph is built from)."""
    real = standin["config"]
    if standin["arch"] == "bert":
        cfg = sizes.shrink(real, size)
        return cfg, cfg
    cfg = sizes.shrink(real, size, hidden="dim", layers="n_layers", heads="n_heads", intermediate="hidden_dim")
    encoder = {"hidden_size": cfg["dim"], "num_hidden_layers": cfg["n_layers"], "num_attention_heads": cfg["n_heads"],
               "intermediate_size": cfg["hidden_dim"], "hidden_act": cfg["activation"], "layer_norm_eps": 1e-12,
               "vocab_size": cfg["vocab_size"], "max_position_embeddings": cfg["max_position_embeddings"],
               "type_vocab_size": 1}
    return cfg, encoder


def write(standin, out_dir, size, shared_dir):
    config, enc = encoder_config(standin, size)
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
    window = sizes.window(enc["max_position_embeddings"], size)
    tok = make_tokenizer("bert", shared_dir, window)
    assert tok.vocab_size == enc["vocab_size"], (tok.vocab_size, enc["vocab_size"])
    H, n = enc["hidden_size"], len(labels)
    bert = standin["arch"] == "bert"

    W = L.Weights(standin["seed"])
    declare_encoder(W, enc)
    if not bert:
        W.w["embeddings.token_type_embeddings.weight"][:] = 0  # DistilBERT has no token types
        W.linear("pre_classifier", H, H, 1.0 / np.sqrt(H))
    else:
        W.linear("pooler.dense", H, H, 1.0 / np.sqrt(H))
    W.linear("classifier", H, n, 1.0 / np.sqrt(H))

    b = L.Onnx(W, opset=standin["opset"])
    h = encoder_graph(b, enc, "absolute", "token_type_ids" if bert else None)
    first = b.op("Gather", [h, b.i64(0)], axis=1)  # [CLS]
    x = b.op("Tanh", [b.linear(first, "pooler.dense")]) if bert else b.op("Relu", [b.linear(first, "pre_classifier")])
    y = b.op("MatMul", [x, b.p("classifier.weight")])
    b.output("Add", [y, b.p("classifier.bias")], "logits")
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if bert else [])

    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b, [(name, INT64, DYNAMIC) for name in names],
             [("logits", FLOAT, ["batch_size", n])], opset=standin["opset"])
    del b
    out.bytes("config.json", dump_json(config))
    out.tokenizer(tok)

    W64 = W.float64()

    def logits(ids, mask, types):
        pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
        hidden = encoder_numpy(W64, enc, ids, mask, types if bert else np.zeros_like(types), pos)
        first = hidden[:, 0]
        x = np.tanh(L.linear(W64, first, "pooler.dense")) if bert else np.maximum(L.linear(W64, first, "pre_classifier"), 0)
        return L.linear(W64, x, "classifier")

    gold, _ = golden.classify(repo=standin["repo"], family=standin["arch"], size=size, tok=tok, window=window,
                              logits=logits, labels=labels, activation=standin["activation"])
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
