"""
ColBERT late-interaction models in PyLate's layout: answerdotai/answerai-colbert-small-v1.

A BertModel and a linear projection without bias (PyLate's Dense module, 1_Dense, 384 -> 96),
exported as one graph: inputs `input_ids`, `attention_mask`, `token_type_ids` int64
[batch_size, sequence_length]; output `token_embeddings` float32 [batch_size, sequence_length, 96],
the projected token vectors before normalisation. config_sentence_transformers.json says how
queries and documents are encoded (PyLate's ColBERT, as colbert-ir's ColBERT does):
- a marker token after [CLS]: `query_prefix` "[unused0]" or `document_prefix` "[unused1]";
- queries cut to `query_length` tokens and padded to it with [MASK] ("query augmentation"); the
  [MASK] tokens are not attended (`attend_to_expansion_tokens` false) but their vectors are kept;
- documents cut to `document_length`, their punctuation tokens (`skiplist_words`) left out;
- every token vector L2-normalised; a document scores sum over query tokens of the max cosine
  over its tokens (MaxSim).
"""
import string

import numpy as np

import golden
import layers as L
import sizes
from families.bert import E5_SMALL_V2_CONFIG, declare_encoder, encoder_graph, encoder_numpy
from folder import Folder, dump_json, write_model_files
from onnx_writer import FLOAT, INT64
from tokenizers import make_tokenizer

DYNAMIC = ["batch_size", "sequence_length"]
DIM = 96

COLBERT_CONFIG = dict(E5_SMALL_V2_CONFIG, _name_or_path="answerdotai/answerai-colbert-small-v1",
                      transformers_version="4.48.2")

PYLATE_CONFIG = {
    "__version__": {"sentence_transformers": "3.4.1", "transformers": "4.48.2", "pytorch": "2.5.1", "pylate": "1.1.4"},
    "prompts": {},
    "default_prompt_name": None,
    "similarity_fn_name": "MaxSim",
    "query_prefix": "[unused0]",
    "document_prefix": "[unused1]",
    "query_length": 32,
    "document_length": 300,
    "attend_to_expansion_tokens": False,
    "skiplist_words": list(string.punctuation),
    "do_query_expansion": True,
}

STANDINS = [
    {
        "repo": "answerdotai/answerai-colbert-small-v1",
        "task": "late-interaction",
        "tokenizer": "bert",
        "opset": 14,
        "seed": 1201,
    },
]


def colbert_files(hidden):
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
    ]
    dense = {"in_features": hidden, "out_features": DIM, "bias": False,
             "activation_function": "torch.nn.modules.linear.Identity", "use_residual": False}
    return {
        "config.json": dump_json(COLBERT_CONFIG),
        "modules.json": dump_json(modules),
        "1_Dense/config.json": dump_json(dense),
        "sentence_bert_config.json": dump_json({"max_seq_length": 299, "do_lower_case": False}),
        "config_sentence_transformers.json": dump_json(PYLATE_CONFIG),
    }


def write(standin, out_dir, size, shared_dir):
    window = sizes.window(512, size)
    tok = make_tokenizer(standin["tokenizer"], shared_dir, window)
    cfg = sizes.shrink(COLBERT_CONFIG, size)
    files = colbert_files(cfg["hidden_size"])

    W = L.Weights(standin["seed"])
    declare_encoder(W, cfg)
    W.linear("linear", cfg["hidden_size"], DIM, 1.0 / np.sqrt(cfg["hidden_size"]), bias=False)
    b = L.Onnx(W, opset=standin["opset"])
    h = encoder_graph(b, cfg, "absolute", "token_type_ids")
    b.output("MatMul", [h, b.p("linear.weight")], "token_embeddings")

    out = Folder(out_dir)
    out.onnx("onnx/model.onnx", b,
             [(name, INT64, DYNAMIC) for name in ("input_ids", "attention_mask", "token_type_ids")],
             [("token_embeddings", FLOAT, DYNAMIC + [DIM])], opset=standin["opset"])
    del b
    write_model_files(out, files, cfg, window, size)
    out.tokenizer(tok)

    W64 = W.float64()

    def vectors(ids, mask, types):
        pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
        return L.linear(W64, encoder_numpy(W64, cfg, ids, mask, types, pos), "linear", bias=False)

    vocab = tok.wordpiece.vocab
    markers = {"query": vocab[PYLATE_CONFIG["query_prefix"]], "document": vocab[PYLATE_CONFIG["document_prefix"]]}
    skiplist = {vocab[w] for w in PYLATE_CONFIG["skiplist_words"] if w in vocab}
    gold = golden.late_interaction(repo=standin["repo"], family="colbert", size=size, tok=tok, vectors=vectors,
                                   markers=markers, mask_id=vocab["[MASK]"], skiplist=skiplist,
                                   query_length=PYLATE_CONFIG["query_length"],
                                   document_length=PYLATE_CONFIG["document_length"])
    out.golden(gold)
    return {"params": W.params(), "files": out.files}
