"""
The golden inputs every stand-in is run on, and golden.json built from a family's independent
numpy forward pass: truncation as HF tokenizers / sentence-transformers do it (the final special
token kept; pairs cut `longest_first`), pooling, normalisation, Matryoshka cuts, rerank scores.

A family passes two callables working on padded int64 batches (float64 results):
  embed:  hidden(input_ids [B, S], attention_mask [B, S], token_type_ids [B, S]) -> [B, S, H]
  rerank: logits(input_ids [B, S], attention_mask [B, S], token_type_ids [B, S]) -> [B, L]
"""
import io
import json
import math
import os

import numpy as np

TOLERANCE = 1e-4  # what the server's tests allow; ONNX Runtime float32 agrees to ~1e-6
BATCH_TOLERANCE = 1e-6  # numpy padded batch vs one at a time

PARAGRAPH = (
    "Photosynthesis is the process by which green plants, algae and some bacteria convert light "
    "energy into chemical energy. During this process, carbon dioxide and water are transformed "
    "into glucose and oxygen inside the chloroplasts. The light-dependent reactions take place in "
    "the thylakoid membranes, while the Calvin cycle runs in the stroma."
)

EMBED_TEXTS = [
    "What is the capital of France?",
    "hello world",
    PARAGRAPH,
    "Café déjà vu: the naïve façade of the jalapeño piñata in Zürich cost €12.50, Ångström's Straße!",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "القاهرة هي عاصمة مصر وأكبر مدنها.",
    "I love pizza 🍕🍕 and sushi 🍣! Emoji words: 😀 and ok👍",
    "Visit https://example.com/path?q=1&r=2 or email test.user@example.org before 2024-12-31.",
    "  Leading spaces,\ttabs\tand\nnew\nlines   and   multiple   spaces  ",
]

# Texts embedded once more under each prompt the model declares.
PROMPT_TEXTS = ["how much protein should a female eat", "Paris is the capital of France."]

RERANK_PAIRS = [
    ("what is the capital of france?", "Paris is the capital and most populous city of France."),
    ("what is the capital of france?", "Berlin is the capital and largest city of Germany."),
    ("how does photosynthesis work", PARAGRAPH),
    ("東京はどこ", "東京は日本の首都です。"),
    ("café prices in zürich", "A café au lait costs €3.50 in Paris, cheaper than in Zürich."),
    ("best pizza topping 🍕", "I love pizza with pineapple; others prefer pepperoni & mushrooms."),
]

_TOPICS = [
    "distributed databases", "compiler optimisation", "coral reef ecology", "medieval trade routes",
    "battery chemistry", "urban planning", "protein folding", "jazz improvisation",
]


def long_text(tok, min_tokens):
    """A text whose content tokens exceed `min_tokens` (so it is cut at the window)."""
    parts = []
    i = 0
    while True:
        topic = _TOPICS[i % len(_TOPICS)]
        parts.append(
            f"Chapter {i + 1} discusses {topic}. Researchers have studied {topic} for many decades, "
            f"and the literature keeps growing every year. In this chapter we summarise the main ideas, "
            f"compare competing explanations, and list open questions that remain unresolved."
        )
        i += 1
        if i % 4 == 0:
            text = " ".join(parts)
            if len(tok.encode(text)) > min_tokens:
                return text


# ---------------------------------------------------------------------------------------------
# Truncation (HF tokenizers semantics, specials kept)
# ---------------------------------------------------------------------------------------------
def single(tok, text, window):
    content = tok.encode(text)[: window - tok.single_specials]
    return list(tok.single(content)), [0] * (len(content) + tok.single_specials)


def longest_first(n1, n2, budget):
    """Lengths kept of two sequences cut to `budget` by HF tokenizers' longest_first."""
    if n1 + n2 <= budget:
        return n1, n2
    swap = n1 > n2
    if swap:
        n1, n2 = n2, n1
    n2 = n1 if n1 > budget else max(n1, budget - n1)
    if n1 + n2 > budget:
        n1 = budget // 2
        n2 = n1 + budget % 2
    return (n2, n1) if swap else (n1, n2)


def pair(tok, query, document, window):
    a, b = tok.encode(query), tok.encode(document)
    na, nb = longest_first(len(a), len(b), window - tok.pair_specials)
    ids, type_ids = tok.pair(a[:na], b[:nb])
    return list(ids), list(type_ids)


# ---------------------------------------------------------------------------------------------
# Batches and pooling
# ---------------------------------------------------------------------------------------------
def pad(rows, pad_id, side="right"):
    S = max(len(r) for r in rows)
    ids = np.full((len(rows), S), pad_id, np.int64)
    mask = np.zeros((len(rows), S), np.int64)
    for i, r in enumerate(rows):
        sl = slice(0, len(r)) if side == "right" else slice(S - len(r), S)
        ids[i, sl] = r
        mask[i, sl] = 1
    return ids, mask


def pool(h, mask, mode):
    """h [B, S, H], mask [B, S] -> [B, H] (sentence-transformers Pooling)."""
    m = mask.astype(np.float64)[..., None]
    if mode == "cls":
        return h[:, 0]
    if mode == "mean":
        return (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    if mode == "max":
        return np.where(m > 0, h, -1e9).max(1)
    if mode == "lasttoken":
        # the last attended position of each row (works for left or right padding)
        last = mask.shape[1] - 1 - np.argmax(mask[:, ::-1], axis=1)
        return h[np.arange(h.shape[0]), last]
    raise ValueError(mode)


def l2n(v):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def r7(a):
    return [float(f"{float(x):.7g}") for x in np.asarray(a).ravel()]


def _run(fn, rows, type_rows, pad_id, side):
    ids, mask = pad(rows, pad_id, side)
    types, _ = pad(type_rows, 0, side)
    return fn(ids, mask, types), mask


def _short(rows, window):
    """Indices of the rows the padded-batch check runs on: all but those cut at the window, whose
    padding to the window would make the check cost ten times the rest (they run alone)."""
    return [i for i, r in enumerate(rows) if len(r) < window]


def _logits_checked(fn, rows, type_rows, pad_id, side, window, repo):
    """Each row's logits run alone, checked against the short rows run as one padded batch (and the
    largest difference, which the golden records)."""
    singles = [_run(fn, [r], [t], pad_id, side)[0][0] for r, t in zip(rows, type_rows)]
    short = _short(rows, window)
    batch, _ = _run(fn, [rows[i] for i in short], [type_rows[i] for i in short], pad_id, side)
    batch_diff = float(np.abs(batch - np.stack([singles[i] for i in short])).max())
    assert batch_diff < BATCH_TOLERANCE, f"{repo}: padded batch differs from one at a time by {batch_diff}"
    return singles, batch_diff


# ---------------------------------------------------------------------------------------------
# golden.json
# ---------------------------------------------------------------------------------------------
def with_long_text(window):
    """Whether the golden inputs include a text over the window: not for windows over
    LONG_TEXT_LIMIT, whose float64 forward at the real sizes would take tens of minutes (tiny
    windows stop at 1024, so the tests always have it)."""
    return window <= LONG_TEXT_LIMIT


LONG_TEXT_LIMIT = 1024

# Set by `make_standins.py --no-golden` (bench models): no reference forward pass, no golden.json.
SKIP = False


def embedding(*, repo, family, size, tok, window, hidden, pooling, normalize, prompts=None,
              matryoshka=(), pad_side="right"):
    """golden.json for an embedder. `prompts`: {prompt_name: prompt text} of the model's
    config_sentence_transformers.json (or its documented prefixes)."""
    if SKIP:
        return None, 0.0
    texts = EMBED_TEXTS + ([long_text(tok, window)] if with_long_text(window) else [])
    cases = [(t, None) for t in texts]
    for name in prompts or {}:
        cases += [(t, name) for t in PROMPT_TEXTS]
    items, rows, type_rows = [], [], []
    for text, prompt_name in cases:
        ids, types = single(tok, (prompts[prompt_name] if prompt_name else "") + text, window)
        rows.append(ids)
        type_rows.append(types)
    singles = []
    for ids, types in zip(rows, type_rows):
        h, mask = _run(hidden, [ids], [types], tok.pad_id, pad_side)
        singles.append(pool(h, mask, pooling)[0])
    short = _short(rows, window)
    h, mask = _run(hidden, [rows[i] for i in short], [type_rows[i] for i in short], tok.pad_id, pad_side)
    batch_diff = float(np.abs(pool(h, mask, pooling) - np.stack([singles[i] for i in short])).max())
    assert batch_diff < BATCH_TOLERANCE, f"{repo}: padded batch differs from one at a time by {batch_diff}"
    for (text, prompt_name), ids, pooled in zip(cases, rows, singles):
        items.append({"text": text, "prompt_name": prompt_name, "input_ids": ids,
                      "pooled": r7(pooled), "normalized": r7(l2n(pooled))})
    golden = {"repo": repo, "family": family, "task": "embedding", "size": size, "tolerance": TOLERANCE,
              "pooling": pooling, "normalize": normalize, "window": window, "embeddings": items}
    if prompts:
        golden["prompts"] = prompts  # the text each prompt_name prepends
    if matryoshka:
        golden["matryoshka"] = {str(d): [r7(l2n(l2n(p)[:d])) for p in singles] for d in matryoshka}
    return golden, batch_diff


def score_of(logits, positive_label):
    """sigmoid of a single logit; softmax of the positive label for a multi-label head."""
    if len(logits) == 1:
        return 1.0 / (1.0 + math.exp(-logits[0]))
    e = np.exp(logits - logits.max())
    return float(e[positive_label] / e.sum())


def rerank(*, repo, family, size, tok, window, logits, positive_label=0, pad_side="right"):
    if SKIP:
        return None, 0.0
    pairs = RERANK_PAIRS + ([("what do researchers say about protein folding?", long_text(tok, window))]
                            if with_long_text(window) else [])
    rows, type_rows = [], []
    for q, d in pairs:
        ids, types = pair(tok, q, d, window)
        rows.append(ids)
        type_rows.append(types)
    singles, batch_diff = _logits_checked(logits, rows, type_rows, tok.pad_id, pad_side, window, repo)
    items = [{"query": q, "document": d, "input_ids": ids, "token_type_ids": types,
              "logits": r7(lg), "score": r7([score_of(lg, positive_label)])[0]}
             for (q, d), ids, types, lg in zip(pairs, rows, type_rows, singles)]
    return {"repo": repo, "family": family, "task": "rerank", "size": size, "tolerance": TOLERANCE,
            "window": window, "rerank": items}, batch_diff


def write(path, golden):
    """Pretty JSON with lists of numbers on one line (keeps golden files small and readable)."""

    def enc(o, level):
        pad_, inner = "  " * level, "  " * (level + 1)
        if isinstance(o, dict):
            body = ",\n".join(f"{inner}{json.dumps(k)}: {enc(v, level + 1)}" for k, v in o.items())
            return "{\n" + body + "\n" + pad_ + "}"
        if isinstance(o, list) and o and any(isinstance(x, (dict, list)) for x in o):
            return "[\n" + ",\n".join(inner + enc(x, level + 1) for x in o) + "\n" + pad_ + "]"
        return json.dumps(o, ensure_ascii=False)

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(enc(golden, 0) + "\n")


# ---------------------------------------------------------------------------------------------
# Sparse vectors and late interaction
# ---------------------------------------------------------------------------------------------
def sparse(*, repo, family, size, tok, window, sparse):
    """golden.json for a sparse encoder. `sparse(ids, mask, types) -> [B, V]` float64 weights
    (zero where absent). Items: the indices with a nonzero weight, ascending, and their values."""
    if SKIP:
        return None
    texts = EMBED_TEXTS + ([long_text(tok, window)] if with_long_text(window) else [])
    rows = [single(tok, t, window)[0] for t in texts]
    singles = [sparse(*pad([r], tok.pad_id), np.zeros((1, len(r)), np.int64))[0] for r in rows]
    short = _short(rows, window)
    ids, mask = pad([rows[i] for i in short], tok.pad_id)
    batch = sparse(ids, mask, np.zeros_like(ids))
    batch_diff = float(np.abs(batch - np.stack([singles[i] for i in short])).max())
    assert batch_diff < BATCH_TOLERANCE, f"{repo}: padded batch differs from one at a time by {batch_diff}"
    items = []
    for text, ids_, weights in zip(texts, rows, singles):
        nz = np.flatnonzero(weights)
        items.append({"text": text, "input_ids": ids_, "indices": [int(i) for i in nz], "values": r7(weights[nz])})
    return {"repo": repo, "family": family, "task": "sparse", "size": size, "tolerance": TOLERANCE,
            "window": window, "sparse": items}


def colbert_query(tok, text, marker, mask_id, query_length):
    """[CLS] marker content [SEP], cut to query_length, then [MASK] up to it; the attended length."""
    content = tok.encode(text)[: query_length - 1 - tok.single_specials]
    ids = tok.single(content)
    ids = ids[:1] + [marker] + ids[1:]
    return ids + [mask_id] * (query_length - len(ids)), len(ids)


def colbert_document(tok, text, marker, document_length):
    content = tok.encode(text)[: document_length - 1 - tok.single_specials]
    ids = tok.single(content)
    return ids[:1] + [marker] + ids[1:]


def late_interaction(*, repo, family, size, tok, vectors, markers, mask_id, skiplist, query_length, document_length):
    """golden.json for a ColBERT model. `vectors(ids, mask, types) -> [B, S, D]` float64.
    Queries: every token's normalised vector ([MASK] expansion included, not attended); documents:
    the normalised vectors of the tokens not in `skiplist`; scores: MaxSim of each pair."""
    if SKIP:
        return None
    long_query = "what do researchers say about " + " and ".join(_TOPICS)
    queries, documents = [], []
    for text in sorted({q for q, _ in RERANK_PAIRS}) + [long_query]:
        ids, attended = colbert_query(tok, text, markers["query"], mask_id, query_length)
        mask = np.array([[1] * attended + [0] * (len(ids) - attended)], np.int64)
        v = l2n(vectors(np.array([ids], np.int64), mask, np.zeros_like(mask))[0])
        queries.append({"text": text, "input_ids": ids, "attended": attended, "vectors": [r7(x) for x in v]})
    for text in sorted({d for _, d in RERANK_PAIRS}) + [long_text(tok, document_length)]:
        ids = colbert_document(tok, text, markers["document"], document_length)
        h = vectors(*pad([ids], tok.pad_id), np.zeros((1, len(ids)), np.int64))[0]
        kept = [i for i, t in enumerate(ids) if t not in skiplist]
        documents.append({"text": text, "input_ids": ids, "kept": kept, "vectors": [r7(x) for x in l2n(h[kept])]})
    # Batched documents (padded) give the same vectors: checked once here.
    short = [d for d in documents if len(d["input_ids"]) < document_length]
    ids, mask = pad([d["input_ids"] for d in short], tok.pad_id)
    batch = vectors(ids, mask, np.zeros_like(ids))
    for row, d in enumerate(short):
        diff = np.abs(l2n(batch[row, d["kept"]]) - np.array(d["vectors"])).max()
        assert diff < 1e-6, f"{repo}: padded batch differs from one at a time by {diff}"
    by_text = {d["text"]: np.array(d["vectors"]) for d in documents}
    q_by_text = {q["text"]: np.array(q["vectors"]) for q in queries}
    scores = [{"query": q, "document": d, "score": r7([float((q_by_text[q] @ by_text[d].T).max(1).sum())])[0]}
              for q, d in RERANK_PAIRS]
    return {"repo": repo, "family": family, "task": "late-interaction", "size": size, "tolerance": TOLERANCE,
            "query_length": query_length, "document_length": document_length,
            "queries": queries, "documents": documents, "scores": scores}


# Texts a classifier is run on: plain, hostile and mixed (the moderation stand-in's labels), and the
# embedders' edge cases; pairs (premise, hypothesis) run with their token types.
CLASSIFY_TEXTS = [
    "I absolutely loved this film, the acting was wonderful.",
    "This was the worst meal I have ever had; never again.",
    "You are an idiot and everyone hates you.",
    "I will find you and hurt you.",
] + EMBED_TEXTS[1:5]

CLASSIFY_PAIRS = RERANK_PAIRS[:3]


def activate(logits, activation):
    """A row of logits as the model's scores: transformers' text-classification pipeline's choice."""
    if activation == "none":
        return logits
    if activation == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits))
    e = np.exp(logits - logits.max())
    return e / e.sum()


def classify(*, repo, family, size, tok, window, logits, labels, activation, pad_side="right"):
    """golden.json for a sequence classifier: texts cut to the window, then pairs cut longest
    first; the logits and the activated scores of each."""
    if SKIP:
        return None, 0.0
    texts = CLASSIFY_TEXTS + ([long_text(tok, window)] if with_long_text(window) else [])
    cases = [(t, None) for t in texts] + list(CLASSIFY_PAIRS)
    rows, type_rows = [], []
    for text, text_pair in cases:
        ids, types = single(tok, text, window) if text_pair is None else pair(tok, text, text_pair, window)
        rows.append(ids)
        type_rows.append(types)
    singles, batch_diff = _logits_checked(logits, rows, type_rows, tok.pad_id, pad_side, window, repo)
    items = [{"text": text, "text_pair": text_pair, "input_ids": ids, "token_type_ids": types,
              "logits": r7(lg), "scores": r7(activate(lg, activation))}
             for (text, text_pair), ids, types, lg in zip(cases, rows, type_rows, singles)]
    return {"repo": repo, "family": family, "task": "classify", "size": size, "tolerance": TOLERANCE,
            "window": window, "labels": labels, "activation": activation, "classify": items}, batch_diff


# ---------------------------------------------------------------------------------------------
# Multimodal (text and image towers in one vector space)
# ---------------------------------------------------------------------------------------------
MULTIMODAL_TEXTS = [
    "a photo of a cat",
    "a diagram of photosynthesis",
    "A red car parked beside an old oak tree.",
    EMBED_TEXTS[3],
    EMBED_TEXTS[6],
    EMBED_TEXTS[8],
    PARAGRAPH,
]


def multimodal(*, repo, family, size, out, tok, window, encode, text_fn, image_fn, processor, normalize,
               dimensions, vision_tokens, image_size, prompts=None, matryoshka=(), extra=None):
    """golden.json for a text / image embedder, and its test images with their pixel values.

    encode(text) -> input_ids as the server must build them (specials, truncation, padding to a
    fixed length where the model needs it); text_fn(ids [B, S], mask [B, S]) -> [B, D] and
    image_fn(pixel_values [B, 3, H, W]) -> [B, D] are the graphs' vector outputs in float64.
    `processor`: images.pixel_values' config. `out`: the stand-in's Folder (images and their
    pixel values are written into it)."""
    import images

    for rel, n in images.write_images(out.root).items():
        out.files[rel] = n
    if SKIP:
        return None
    cases = [(t, None) for t in MULTIMODAL_TEXTS + ([long_text(tok, window)] if with_long_text(window) else [])]
    for name in prompts or {}:
        cases += [(t, name) for t in PROMPT_TEXTS]
    rows = [encode((prompts[name] if name else "") + text) for text, name in cases]
    singles = [text_fn(*pad([r], tok.pad_id))[0] for r in rows]
    short = [i for i, r in enumerate(rows) if len(r) <= 128]  # the long text runs alone
    batch = text_fn(*pad([rows[i] for i in short], tok.pad_id))
    text_diff = float(np.abs(batch - np.stack([singles[i] for i in short])).max())
    assert text_diff < BATCH_TOLERANCE, f"{repo}: padded text batch differs from one at a time by {text_diff}"
    texts = [{"text": text, "prompt_name": name, "input_ids": ids, "raw": r7(v), "normalized": r7(l2n(v))}
             for (text, name), ids, v in zip(cases, rows, singles)]

    pixels = []
    for name in images.IMAGES:
        rel = f"{images.FOLDER}/{name}"
        values = images.pixel_values(os.path.join(out.root, rel), processor)
        assert values.shape == (3, image_size, image_size), values.shape
        pixels.append(values)
        buf = io.BytesIO()
        np.save(buf, values)
        out.bytes(rel + ".pixel_values.npy", buf.getvalue())
    image_singles = [image_fn(p[None].astype(np.float64))[0] for p in pixels]
    image_batch = image_fn(np.stack(pixels).astype(np.float64))
    image_diff = float(np.abs(image_batch - np.stack(image_singles)).max())
    assert image_diff < BATCH_TOLERANCE, f"{repo}: image batch differs from one at a time by {image_diff}"
    image_items = [{"file": f"{images.FOLDER}/{name}", "pixel_values": f"{images.FOLDER}/{name}.pixel_values.npy",
                    "pixel_values_sha256": images.sha256_of(p), "raw": r7(v), "normalized": r7(l2n(v))}
                   for name, p, v in zip(images.IMAGES, pixels, image_singles)]

    golden = {"repo": repo, "family": family, "task": "multimodal", "size": size, "tolerance": TOLERANCE,
              "normalize": normalize, "dimensions": dimensions, "window": window, "image_size": image_size,
              "vision_tokens": vision_tokens, "pad_token_id": tok.pad_id, **(extra or {}), "texts": texts, "images": image_items}
    if prompts:
        golden["prompts"] = prompts
    if matryoshka:
        vectors = singles + image_singles
        golden["matryoshka"] = {str(d): [r7(l2n(l2n(v)[:d])) for v in vectors] for d in matryoshka}
    return golden
