"""
Tokenizers for the stand-in models: each kind's real tokenizer type, file layout and template, with
an encoder of its own written here (independent of the JavaScript library the server uses) so the
server's token ids can be checked against it.

- bert:       the real BAAI/bge-small-en-v1.5 files; BERT WordPiece.
- mpnet:      the real all-mpnet-base-v2 tokenizer.json; WordPiece with `<s> A </s>` templates.
- xlmr:       a SentencePiece Unigram model trained here (nmt_nfkc), written as the XLM-RoBERTa
              files (`sentencepiece.bpe.model`, and a tokenizer.json as transformers converts it).
- modernbert: byte-level BPE trained here, in the layout of answerdotai/ModernBERT-base (OLMo's
              GPT-NeoX-derived tokenizer: NFC, ByteLevel with the GPT-2 regex, runs of spaces as
              added tokens, `[CLS] A [SEP]`).
- qwen3:      byte-level BPE trained here, in the layout of Qwen/Qwen3-Embedding-0.6B (Qwen2
              tokenizer: NFC, Split on the Qwen2 regex then ByteLevel, `A <|endoftext|>`).
- clip:       byte-level BPE with a `</w>` end-of-word suffix trained here, in the layout of
              openai/clip-vit-base-patch32 (NFC, whitespace runs to one space, lowercase; the CLIP
              regex; `<|startoftext|> A <|endoftext|>`).
- siglip:     a SentencePiece Unigram model trained here (T5's ids: <pad> 0, </s> 1, <unk> 2), as
              a tokenizer.json that does SiglipTokenizer's canonicalisation and lowercasing; `A </s>`.
- gemma:      SentencePiece-style BPE with byte fallback trained here, in the layout transformers'
              GemmaConverter writes (spaces to U+2581, no prefix added, `<bos> A`).

Run as a script, it writes each kind's files and the ids it expects for a set of texts:
    python3 scripts/standins/tokenizers.py --out <dir> --shared ../shared
"""
import argparse
import base64
import io
import json
import os
import re
import struct
import sys
import unicodedata

import regex

from onnx_writer import varint  # protobuf varints, as the graph writer writes them

KINDS = ("bert", "mpnet", "xlmr", "modernbert", "qwen3", "clip", "siglip", "gemma")

# Rust's char::is_whitespace (Unicode White_Space), which HF tokenizers uses throughout; Python's
# str.isspace also counts U+001C..U+001F.
_WHITESPACE = regex.compile(r"\p{White_Space}")


def is_whitespace(ch):
    return _WHITESPACE.match(ch) is not None


# ----------------------------------------------------------------------------
# Added tokens: HF tokenizers finds them before the model runs (leftmost, longest first), in the
# raw text for tokens marked `normalized: false`, else in the normalized text.
# ----------------------------------------------------------------------------
class AddedTokens:
    def __init__(self, added_tokens):
        self.raw = {t["content"]: t for t in added_tokens if not t.get("normalized", False)}
        self.normalized = {t["content"]: t for t in added_tokens if t.get("normalized", False)}

    @staticmethod
    def split(text, tokens):
        """[(piece, token or None)], with lstrip / rstrip eating whitespace next to a token."""
        if not tokens:
            return [(text, None)] if text else []
        lengths = sorted({len(c) for c in tokens}, reverse=True)
        out, plain, i = [], [], 0
        while i < len(text):
            match = None
            for n in lengths:
                if text[i:i + n] in tokens:
                    match = tokens[text[i:i + n]]
                    break
            if match is None:
                plain.append(text[i])
                i += 1
                continue
            before = "".join(plain)
            if match.get("lstrip"):
                while before and is_whitespace(before[-1]):
                    before = before[:-1]
            if before:
                out.append((before, None))
            plain = []
            out.append((match["content"], match))
            i += len(match["content"])
            if match.get("rstrip"):
                while i < len(text) and is_whitespace(text[i]):
                    i += 1
        if plain:
            out.append(("".join(plain), None))
        return out


# ----------------------------------------------------------------------------
# BERT: BertNormalizer + BertPreTokenizer + WordPiece, as HF tokenizers (Rust) does them.
# ----------------------------------------------------------------------------
def _is_control(ch):
    if ch in "\t\n\r":
        return False
    # Unassigned code points (Cn) are kept: the categories table HF tokenizers uses lists none.
    return unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def _is_chinese_char(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _is_bert_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def bert_normalize(text, lowercase=True):
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if is_whitespace(ch):
            out.append(" ")
        elif _is_chinese_char(cp):
            out.extend((" ", ch, " "))
        else:
            out.append(ch)
    text = "".join(out)
    if lowercase:
        # strip_accents null follows lowercase: NFD, then drop non-spacing marks.
        text = "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
        # Per character, as HF tokenizers does (no final-sigma rule).
        text = "".join(ch.lower() for ch in text)
    return text


def bert_pre_tokenize(text):
    words = []
    for chunk in text.split(" "):
        cur = []
        for ch in chunk:
            if _is_bert_punctuation(ch):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(ch)
            else:
                cur.append(ch)
        if cur:
            words.append("".join(cur))
    return words


class WordPiece:
    def __init__(self, vocab, unk, prefix="##", max_chars=100):
        self.vocab, self.unk_id, self.prefix, self.max_chars = vocab, vocab[unk], prefix, max_chars

    def word(self, word):
        if len(word) > self.max_chars:
            return [self.unk_id]
        ids, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                sub = word[start:end] if start == 0 else self.prefix + word[start:end]
                if sub in self.vocab:
                    found = self.vocab[sub]
                    break
                end -= 1
            if found is None:
                return [self.unk_id]
            ids.append(found)
            start = end
        return ids


class StandInTokenizer:
    """A stand-in's tokenizer files and an independent encoder of the same tokenizer."""

    kind = ""
    files = {}
    vocab_size = 0
    pad_id = 0
    single_specials = 0
    pair_specials = 0

    def encode(self, text):
        raise NotImplementedError

    def single(self, ids):
        return self._single_before + list(ids) + self._single_after

    def pair(self, a, b):
        before, between, after = self._pair_runs
        ids = before + list(a) + between + list(b) + after
        types = ([0] * (len(before) + len(a) + len(between)) + [self._type_b] * (len(b) + len(after)))
        return ids, types

    def _set_template(self, single_before, single_after, pair_runs, type_b):
        self._single_before, self._single_after = single_before, single_after
        self._pair_runs, self._type_b = pair_runs, type_b
        self.single_specials = len(single_before) + len(single_after)
        self.pair_specials = sum(len(r) for r in pair_runs)


class WordPieceTokenizer(StandInTokenizer):
    def __init__(self, kind, tokenizer_json, files):
        self.kind, self.files = kind, files
        model = tokenizer_json["model"]
        assert model["type"] == "WordPiece"
        vocab = model["vocab"]
        self.vocab_size = max(vocab.values()) + 1
        self.wordpiece = WordPiece(vocab, model["unk_token"], model["continuing_subword_prefix"], model["max_input_chars_per_word"])
        normalizer = tokenizer_json["normalizer"]
        assert normalizer["type"] == "BertNormalizer" and normalizer["clean_text"] and normalizer["handle_chinese_chars"]
        self.lowercase = normalizer["lowercase"]
        self.added = AddedTokens(tokenizer_json["added_tokens"])
        # Tokens marked `normalized` are looked for as the normalizer writes them.
        self.added.normalized = {self.normalize(c): t for c, t in self.added.normalized.items()}

    def normalize(self, text):
        return bert_normalize(text, self.lowercase)

    def encode(self, text):
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
                continue
            for sub, sub_token in AddedTokens.split(self.normalize(piece), self.added.normalized):
                if sub_token is not None:
                    ids.append(sub_token["id"])
                    continue
                for word in bert_pre_tokenize(sub):
                    ids.extend(self.wordpiece.word(word))
        return ids


def _json_bytes(obj):
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _with_max_length(config_bytes, model_max_length):
    """The config file as it is, but for its `model_max_length`."""
    text = config_bytes.decode("utf-8")
    text, n = re.subn(r'("model_max_length":\s*)\d+', lambda m: m.group(1) + str(model_max_length), text)
    assert n == 1
    return text.encode("utf-8")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def make_bert(shared_dir, model_max_length):
    src = os.path.join(shared_dir, "models", "hub-files", "BAAI__bge-small-en-v1.5")
    files = {name: _read(os.path.join(src, name)) for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")}
    files["tokenizer_config.json"] = _with_max_length(files["tokenizer_config.json"], model_max_length)
    tok = WordPieceTokenizer("bert", json.loads(files["tokenizer.json"]), files)
    cls, sep = tok.wordpiece.vocab["[CLS]"], tok.wordpiece.vocab["[SEP]"]
    tok.pad_id = tok.wordpiece.vocab["[PAD]"]
    tok._set_template([cls], [sep], ([cls], [sep], [sep]), 1)
    return tok


def make_mpnet(shared_dir, model_max_length):
    src = os.path.join(shared_dir, "models", "hub-files", "sentence-transformers__all-mpnet-base-v2")
    tokenizer_bytes = _read(os.path.join(src, "tokenizer.json"))
    tokenizer_json = json.loads(tokenizer_bytes)
    vocab = tokenizer_json["model"]["vocab"]
    # The repository's configs (MPNetTokenizer); `<mask>` is an AddedToken that eats the space before it.
    mask = {"content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "__type": "AddedToken"}
    special_tokens_map = {
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "[UNK]", "sep_token": "</s>",
        "pad_token": "<pad>", "cls_token": "<s>", "mask_token": mask,
    }
    tokenizer_config = {
        "do_lower_case": True, **special_tokens_map, "tokenize_chinese_chars": True, "strip_accents": None,
        "model_max_length": model_max_length, "special_tokens_map_file": None,
        "name_or_path": "microsoft/mpnet-base", "tokenizer_class": "MPNetTokenizer",
    }
    by_id = sorted(vocab, key=vocab.get)
    files = {
        "tokenizer.json": tokenizer_bytes,
        "tokenizer_config.json": _json_bytes(tokenizer_config),
        "special_tokens_map.json": _json_bytes(special_tokens_map),
        "vocab.txt": ("\n".join(by_id) + "\n").encode("utf-8"),
    }
    tok = WordPieceTokenizer("mpnet", tokenizer_json, files)
    bos, eos = vocab["<s>"], vocab["</s>"]
    tok.pad_id = vocab["<pad>"]
    # RobertaProcessing: a single token type.
    tok._set_template([bos], [eos], ([bos], [eos, eos], [eos]), 0)
    return tok


# ----------------------------------------------------------------------------
# XLM-RoBERTa: SentencePiece Unigram.
# ----------------------------------------------------------------------------
def read_varint(buf, at):
    value, shift = 0, 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def pb_fields(buf):
    """A protobuf message's fields in order: (field number, wire type, int or bytes)."""
    fields, at = [], 0
    while at < len(buf):
        key, at = read_varint(buf, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, at = read_varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            n, at = read_varint(buf, at)
            value, at = buf[at:at + n], at + n
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"protobuf wire type {wire} not supported")
        fields.append((field, wire, value))
    return fields


def pb_serialize(fields):
    out = bytearray()
    for field, wire, value in fields:
        out += varint(field << 3 | wire)
        if wire == 0:
            out += varint(value)
        elif wire == 2:
            out += varint(len(value)) + value
        else:
            out += value
    return bytes(out)


# ModelProto: 1 pieces, 3 normalizer_spec. SentencePiece: 1 piece, 2 score, 3 type.
# NormalizerSpec: 1 name, 2 precompiled_charsmap, 3 add_dummy_prefix, 4 remove_extra_whitespaces.
def spm_pieces(model):
    pieces = []
    for field, _, value in pb_fields(model):
        if field == 1:
            piece, score, kind = "", 0.0, 1
            for f, _, v in pb_fields(value):
                if f == 1:
                    piece = v.decode("utf-8")
                elif f == 2:
                    score = struct.unpack("<f", v)[0]
                elif f == 3:
                    kind = v
            pieces.append((piece, score, kind))
    return pieces


def spm_charsmap(model):
    for field, _, value in pb_fields(model):
        if field == 3:
            for f, _, v in pb_fields(value):
                if f == 2:
                    return bytes(v)
    return b""


def spm_with_normalizer(model, name, charsmap, dummy_prefix, remove_extra_whitespaces):
    """The model with another normalizer spec (the pieces and their scores unchanged)."""
    spec = [(1, 2, name.encode()), (3, 0, int(dummy_prefix)), (4, 0, int(remove_extra_whitespaces)), (5, 0, 1)]
    if charsmap:
        spec.insert(1, (2, 2, charsmap))
    return pb_serialize([(f, w, pb_serialize(spec) if f == 3 else v) for f, w, v in pb_fields(model)])


class Charsmap:
    """
    A SentencePiece precompiled charsmap: a darts-clone double-array trie of UTF-8 keys whose
    values index NUL-terminated replacements. normalize() applies it the way HF tokenizers'
    Precompiled normalizer does (what the fast tokenizers of XLM-R models run): per extended
    grapheme cluster shorter than 6 bytes, the replacement of the shortest key that prefixes it
    replaces the whole cluster; otherwise each character is looked up alone.
    """

    def __init__(self, blob):
        (trie_size,) = struct.unpack_from("<I", blob, 0)
        self.units = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        self.replacements = blob[4 + trie_size:]

    def _matches(self, key):
        """(length, replacement) of every key that prefixes the bytes `key`, shortest first."""
        units = self.units
        node = (units[0] >> 10) << ((units[0] & (1 << 9)) >> 6)
        for i, byte in enumerate(key):
            if byte == 0:
                return
            node ^= byte
            unit = units[node]
            if unit & ((1 << 31) | 0xFF) != byte:
                return
            node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            if (unit >> 8) & 1:
                start = units[node] & 0x7FFFFFFF
                yield i + 1, self.replacements[start:self.replacements.index(0, start)]

    def _shortest(self, key):
        return next((r.decode("utf-8") for _, r in self._matches(key)), None)

    def transform(self, chunk):
        return self._shortest(chunk.encode("utf-8"))

    def normalize(self, text):
        out = []
        for grapheme in regex.findall(r"\X", text):
            if len(grapheme.encode("utf-8")) < 6:
                norm = self.transform(grapheme)
                if norm is not None:
                    out.append(norm)
                    continue
            for ch in grapheme:
                norm = self.transform(ch)
                out.append(ch if norm is None else norm)
        return "".join(out)

    def normalize_longest(self, text):
        """The charsmap as sentencepiece's normalizer applies it: the longest key at each position."""
        data, out, i = text.encode("utf-8"), bytearray(), 0
        while i < len(data):
            found = None
            for found in self._matches(data[i:i + 256]):
                pass
            if found:
                out += found[1]
                i += found[0]
            else:
                n = 1 if data[i] < 0xC0 else 2 if data[i] < 0xE0 else 3 if data[i] < 0xF0 else 4
                out += data[i:i + n]
                i += n
        return out.decode("utf-8")


def train_unigram(texts, vocab_size):
    import sentencepiece as spm

    spm.set_random_generator_seed(1)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, model_type="unigram", vocab_size=vocab_size,
        normalization_rule_name="nmt_nfkc", num_threads=1, minloglevel=2)
    return model.getvalue()


class Unigram:
    """
    The Unigram segmentation of sentencepiece's EncodeOptimized and HF tokenizers' Unigram: one
    pass over the characters keeping the best path ending at each (a later candidate wins only
    with a strictly higher score; pieces from a start tried shortest first), an unknown character
    scored min score - 10, runs of unknown characters fused. Scores add up in float64, as in HF
    tokenizers (sentencepiece adds float32, which can break an exact tie the other way).
    """

    def __init__(self, vocab, unk_id):
        self.ids = {piece: i for i, (piece, _) in enumerate(vocab)}
        self.scores = [score for _, score in vocab]
        self.longest = max(len(piece) for piece, _ in vocab)
        self.unk_id = unk_id
        self.unk_score = min(self.scores) - 10

    def segment(self, text):
        n = len(text)
        best, start_of, id_of = [0.0] * (n + 1), [-1] * (n + 1), [0] * (n + 1)
        for start in range(n):
            base, single = best[start], False
            for end in range(start + 1, min(n, start + self.longest) + 1):
                i = self.ids.get(text[start:end])
                if i is None:
                    continue
                score = base + self.scores[i]
                if start_of[end] < 0 or score > best[end]:
                    best[end], start_of[end], id_of[end] = score, start, i
                single = single or end == start + 1
            if not single:
                score = base + self.unk_score
                if start_of[start + 1] < 0 or score > best[start + 1]:
                    best[start + 1], start_of[start + 1], id_of[start + 1] = score, start, self.unk_id
        ids, end = [], n
        while end > 0:
            i = id_of[end]
            if not (i == self.unk_id and ids and ids[-1] == self.unk_id):
                ids.append(i)
            end = start_of[end]
        return ids[::-1]


XLMR_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")


class XlmrTokenizer(StandInTokenizer):
    """
    Ids as the XLM-R fast tokenizer (HF tokenizers) gives them with the tokenizer.json written
    here: added tokens split out; the Precompiled charsmap (HF's grapheme rule), runs of spaces
    to one; Metaspace (spaces to U+2581, one prepended, split before each); Unigram.

    sentencepiece itself checks it: check_against_sentencepiece() explains every text where
    sentencepiece's own ids differ (its longest-match normalization, whitespace at the ends, ties).
    """

    def __init__(self, model, model_max_length):
        import sentencepiece as spm

        self.kind = "xlmr"
        self.model = model
        self.pieces = spm_pieces(model)
        assert [p for p, _, _ in self.pieces[:3]] == ["<unk>", "<s>", "</s>"]
        self.sp = spm.SentencePieceProcessor(model_proto=model)
        self.sp_normalize = spm.SentencePieceProcessor(model_proto=spm_with_normalizer(model, "nmt_nfkc", spm_charsmap(model), False, False))
        self.charsmap = Charsmap(spm_charsmap(model))
        # The HF vocabulary (fairseq's order): specials, sentencepiece's pieces but its first three, <mask>.
        self.vocab = [(c, 0.0) for c in XLMR_SPECIALS] + [(p, float(s)) for p, s, _ in self.pieces[3:]] + [("<mask>", 0.0)]
        self.unigram = Unigram(self.vocab, 3)
        self.vocab_size = len(self.vocab)
        self.mask_id = self.vocab_size - 1
        self.pad_id = 1
        self.added = AddedTokens([
            *({"id": i, "content": c} for i, c in enumerate(XLMR_SPECIALS)),
            {"id": self.mask_id, "content": "<mask>", "lstrip": True},
        ])
        self._set_template([0], [2], ([0], [2, 2], [2]), 0)
        self.files = self._files(model_max_length)

    def normalize(self, text):
        """Precompiled, then runs of spaces to one (the tokenizer.json normalizer)."""
        return re.sub(" {2,}", " ", self.charsmap.normalize(text))

    def encode(self, text):
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
                continue
            normalized = self.normalize(piece).replace(" ", "\u2581")
            if normalized and not normalized.startswith("\u2581"):
                normalized = "\u2581" + normalized
            for word in re.findall("\u2581[^\u2581]*|[^\u2581]+", normalized):
                ids.extend(self.unigram.segment(word))
        return ids

    def sentencepiece_ids(self, text):
        """sentencepiece's own ids (as the slow XLMRobertaTokenizer gives them)."""
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
            else:
                ids.extend(3 if i == self.sp.unk_id() else i + 1 for i in self.sp.encode(piece))
        return ids

    def check_against_sentencepiece(self, text):
        """
        None if sentencepiece gives the same ids, else why it does not; raises if no known
        difference between the two explains it.
        """
        ours, theirs = self.encode(text), self.sentencepiece_ids(text)
        if ours == theirs:
            return None
        spm_normalized = "".join(self.sp_normalize.encode(text, out_type=str)).replace("\u2581", " ")
        # The charsmap read here, applied sentencepiece's way, must give sentencepiece's text.
        assert self.charsmap.normalize_longest(text).replace("\u2581", " ") == spm_normalized, text
        if re.sub(" {2,}", " ", spm_normalized) != self.normalize(text):
            return "normalization"  # HF's grapheme rule against sentencepiece's longest match
        space = self.unigram.ids["\u2581"]
        trimmed = ours
        # HF keeps one U+2581 for spaces at the end of a stretch of text; sentencepiece drops them.
        if self.normalize(text).endswith(" ") or any(self.normalize(p).endswith(" ") for p, t in AddedTokens.split(text, self.added.raw) if t is None):
            trimmed = [i for k, i in enumerate(ours) if not (i == space and (k + 1 == len(ours) or ours[k + 1] in (0, 1, 2, 3, self.mask_id)))]
            if trimmed == theirs:
                return "whitespace"
        if sorted(trimmed) == sorted(theirs):
            return "tie"  # the same pieces in another order: equal scores, a tie float32 rounding broke
        raise AssertionError(f"XLM-R ids differ from sentencepiece's without a known reason: {text!r}")

    def _files(self, model_max_length):
        def added(i, content, lstrip=False):
            return {"id": i, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": False, "normalized": False, "special": True}

        charsmap = base64.b64encode(spm_charsmap(self.model)).decode()
        vocab = [[c, 0.0] for c in XLMR_SPECIALS] + [[p, float(s)] for p, s, _ in self.pieces[3:]] + [["<mask>", 0.0]]
        metaspace = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True, "prepend_scheme": "always"}

        def special(name, i):
            return {"id": name, "ids": [i], "tokens": [name]}

        def seq(sid):
            return {"Sequence": {"id": sid, "type_id": 0}}

        def tok(name):
            return {"SpecialToken": {"id": name, "type_id": 0}}

        tokenizer = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [added(i, c) for i, c in enumerate(XLMR_SPECIALS)] + [added(self.mask_id, "<mask>", True)],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Precompiled", "precompiled_charsmap": charsmap},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ]},
            "pre_tokenizer": metaspace,
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [tok("<s>"), seq("A"), tok("</s>")],
                "pair": [tok("<s>"), seq("A"), tok("</s>"), tok("</s>"), seq("B"), tok("</s>")],
                "special_tokens": {"</s>": special("</s>", 2), "<s>": special("<s>", 0)},
            },
            "decoder": metaspace,
            "model": {"type": "Unigram", "unk_id": 3, "vocab": vocab, "byte_fallback": False},
        }
        mask = {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}
        special_tokens_map = {
            "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": mask,
            "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>",
        }
        decoder = {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in tokenizer["added_tokens"]}
        tokenizer_config = {
            "added_tokens_decoder": decoder,
            "bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>", "eos_token": "</s>",
            "mask_token": "<mask>", "model_max_length": model_max_length, "pad_token": "<pad>", "sep_token": "</s>",
            "sp_model_kwargs": {}, "tokenizer_class": "XLMRobertaTokenizer", "unk_token": "<unk>",
        }
        return {
            "tokenizer.json": _json_bytes(tokenizer),
            "tokenizer_config.json": _json_bytes(tokenizer_config),
            "special_tokens_map.json": _json_bytes(special_tokens_map),
            "sentencepiece.bpe.model": self.model,
        }


def make_xlmr(shared_dir, model_max_length):
    return XlmrTokenizer(train_unigram(training_texts(shared_dir), 8000), model_max_length)


# ----------------------------------------------------------------------------
# SigLIP: SentencePiece Unigram in T5's layout, after SigLIP's text canonicalisation.
# ----------------------------------------------------------------------------
# SiglipTokenizer.canonicalize_text removes Python's string.punctuation.
SIGLIP_PUNCTUATION = "[" + re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + "]"
SIGLIP_SPECIALS = ("<pad>", "</s>", "<unk>")


class SiglipTokenizer(StandInTokenizer):
    """
    google/siglip-base-patch16-224's tokenizer as a tokenizer.json: SiglipTokenizer's
    canonicalisation (ASCII punctuation removed, whitespace runs to one space, stripped),
    lowercase (do_lower_case), the SentencePiece charsmap; Metaspace; Unigram over the
    SentencePiece vocabulary as it is (`<pad>` 0, `</s>` 1, `<unk>` 2); `A </s>`. Texts are padded
    with `</s>` to 64 tokens, as the model was trained (the padding is left to the caller, as in
    transformers, where `padding="max_length"` is the processor's documented call).
    """

    def __init__(self, model, model_max_length):
        self.kind = "siglip"
        self.model = model
        self.pieces = spm_pieces(model)
        assert [p for p, _, _ in self.pieces[:3]] == list(SIGLIP_SPECIALS)
        self.charsmap = Charsmap(spm_charsmap(model))
        self.vocab = [(c, 0.0) for c in SIGLIP_SPECIALS] + [(p, float(s)) for p, s, _ in self.pieces[3:]]
        self.unigram = Unigram(self.vocab, 2)
        self.vocab_size = len(self.vocab)
        self.pad_id = 1
        self.added = AddedTokens([{"id": i, "content": c} for i, c in enumerate(SIGLIP_SPECIALS)])
        self._set_template([], [1], ([], [1], [1]), 0)
        self.files = self._files(model_max_length)

    def normalize(self, text):
        text = regex.sub(SIGLIP_PUNCTUATION, "", text)
        text = regex.sub(r"\s+", " ", text).strip(" ")
        text = "".join(ch.lower() for ch in text)
        return re.sub(" {2,}", " ", self.charsmap.normalize(text))

    def encode(self, text):
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
                continue
            normalized = self.normalize(piece).replace(" ", "\u2581")
            if normalized and not normalized.startswith("\u2581"):
                normalized = "\u2581" + normalized
            for word in re.findall("\u2581[^\u2581]*|[^\u2581]+", normalized):
                ids.extend(self.unigram.segment(word))
        return ids

    def _files(self, model_max_length):
        charsmap = base64.b64encode(spm_charsmap(self.model)).decode()
        metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
        added = [added_token(i, c) for i, c in enumerate(SIGLIP_SPECIALS)]
        tokenizer = {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Replace", "pattern": {"Regex": SIGLIP_PUNCTUATION}, "content": ""},
                {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
                {"type": "Strip", "strip_left": True, "strip_right": True},
                {"type": "Lowercase"},
                {"type": "Precompiled", "precompiled_charsmap": charsmap},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ]},
            "pre_tokenizer": metaspace,
            "post_processor": template("$A:0 </s>:0", "$A:0 </s>:0 $B:0 </s>:0", [("</s>", 1)]),
            "decoder": metaspace,
            "model": {"type": "Unigram", "unk_id": 2, "vocab": [[p, s] for p, s in self.vocab], "byte_fallback": False},
        }
        special_tokens_map = {
            "eos_token": {"content": "</s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
            "pad_token": {"content": "</s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
            "unk_token": {"content": "<unk>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
        }
        tokenizer_config = {
            "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
            "additional_special_tokens": [], "clean_up_tokenization_spaces": True, "do_lower_case": True,
            "eos_token": "</s>", "model_input_names": ["input_ids"], "model_max_length": model_max_length,
            "pad_token": "</s>", "processor_class": "SiglipProcessor", "sp_model_kwargs": {},
            "tokenizer_class": "SiglipTokenizer", "unk_token": "<unk>",
        }
        return {
            "tokenizer.json": _json_bytes(tokenizer),
            "tokenizer_config.json": _json_bytes(tokenizer_config),
            "special_tokens_map.json": _json_bytes(special_tokens_map),
            "spiece.model": self.model,
        }


def train_t5_unigram(texts, vocab_size):
    """A Unigram model with T5's special ids: <pad> 0, </s> 1, <unk> 2, no <s>."""
    import sentencepiece as spm

    spm.set_random_generator_seed(1)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, model_type="unigram", vocab_size=vocab_size,
        normalization_rule_name="nmt_nfkc", num_threads=1, minloglevel=2,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    return model.getvalue()


def make_siglip(shared_dir, model_max_length):
    texts = [t.lower() for t in training_texts(shared_dir)]
    return SiglipTokenizer(train_t5_unigram(texts, 4000), model_max_length)


# ----------------------------------------------------------------------------
# Byte-level BPE (ModernBERT, Qwen3).
# ----------------------------------------------------------------------------
def bytes_to_unicode():
    """GPT-2's map of the 256 bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_CHARS = bytes_to_unicode()
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def byte_level(piece):
    return "".join(BYTE_CHARS[b] for b in piece.encode("utf-8"))


def pre_tokenize(text, pattern):
    """The pieces a regex Split (Isolated) makes: matches, and the text between them (none here)."""
    out, at = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > at:
            out.append(text[at:m.start()])
        out.append(m.group())
        at = m.end()
    if at < len(text):
        out.append(text[at:])
    return out


def train_bpe(words, merges_wanted):
    """
    BPE merges learned from `words` (symbol tuple -> count): the most frequent adjacent pair each
    time, ties to the smallest pair, so training is deterministic.
    """
    import heapq

    words = [[list(w), c] for w, c in sorted(words.items())]
    counts, where = {}, {}
    for i, (symbols, c) in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            counts[pair] = counts.get(pair, 0) + c
            where.setdefault(pair, set()).add(i)
    heap = [(-c, pair) for pair, c in counts.items()]
    heapq.heapify(heap)
    merges = []
    while heap and len(merges) < merges_wanted:
        c, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -c or c == 0:
            continue
        merges.append(pair)
        merged = pair[0] + pair[1]
        changed = set()
        for i in where.pop(pair, ()):
            symbols, n = words[i]
            for old in zip(symbols, symbols[1:]):
                counts[old] -= n
                changed.add(old)
            out, k = [], 0
            while k < len(symbols):
                if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == pair:
                    out.append(merged)
                    k += 2
                else:
                    out.append(symbols[k])
                    k += 1
            words[i][0] = out
            for new in zip(out, out[1:]):
                counts[new] = counts.get(new, 0) + n
                where.setdefault(new, set()).add(i)
                changed.add(new)
        counts.pop(pair, None)
        for q in changed:
            if counts.get(q, 0) > 0:
                heapq.heappush(heap, (-counts[q], q))
    return merges


class ByteLevelBpe:
    """GPT-2 BPE on byte-level symbols: merge the lowest-ranked adjacent pair until none is left."""

    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.cache = {}

    def word(self, piece, end_of_word_suffix=""):
        """Ids of a pre-tokenized piece (already byte-level); the suffix marks its last symbol."""
        key = (piece, end_of_word_suffix)
        if key in self.cache:
            return self.cache[key]
        symbols = list(piece)
        if end_of_word_suffix and symbols:
            symbols[-1] += end_of_word_suffix
        while len(symbols) > 1:
            pairs = [(self.ranks.get(p, 1 << 30), k) for k, p in enumerate(zip(symbols, symbols[1:]))]
            rank, _ = min(pairs)
            if rank == 1 << 30:
                break
            first, second = next(p for p in zip(symbols, symbols[1:]) if self.ranks.get(p) == rank)
            out, k = [], 0
            while k < len(symbols):
                if k + 1 < len(symbols) and symbols[k] == first and symbols[k + 1] == second:
                    out.append(first + second)
                    k += 2
                else:
                    out.append(symbols[k])
                    k += 1
            symbols = out
        ids = [self.vocab[s] for s in symbols]
        self.cache[key] = ids
        return ids


def added_token(i, content, special=True, normalized=False, lstrip=False):
    return {"id": i, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": False, "normalized": normalized, "special": special}


class ByteLevelBpeTokenizer(StandInTokenizer):
    """
    A byte-level BPE tokenizer: added tokens split out (before NFC, or after it for tokens marked
    `normalized`), NFC, the pre-tokenizer regex, bytes to GPT-2's characters, BPE.
    """

    def __init__(self, kind, pattern, vocab, merges, added_tokens):
        self.kind, self.pattern = kind, pattern
        self.bpe = ByteLevelBpe(vocab, merges)
        self.added = AddedTokens(added_tokens)
        self.vocab_size = max(max(vocab.values()), max(t["id"] for t in added_tokens)) + 1

    def encode(self, text):
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
                continue
            for sub, sub_token in AddedTokens.split(unicodedata.normalize("NFC", piece), self.added.normalized):
                if sub_token is not None:
                    ids.append(sub_token["id"])
                    continue
                for word in pre_tokenize(sub, self.pattern):
                    ids.extend(self.bpe.word(byte_level(word)))
        return ids


def train_byte_level(texts, pattern, vocab_size, first_ids):
    """
    Vocabulary (first_ids, then the 256 byte symbols, then merges) and merges for `vocab_size`
    tokens. The edge cases are trained on too, so that merges exist across the places where
    pre-tokenizers can disagree (a space before NEL or BOM, say).
    """
    words = {}
    for text in texts + EDGE_TEXTS * 5:
        for word in pre_tokenize(unicodedata.normalize("NFC", text), pattern):
            key = tuple(byte_level(word))
            words[key] = words.get(key, 0) + 1
    base = [BYTE_CHARS[b] for b in sorted(BYTE_CHARS, key=lambda b: ord(BYTE_CHARS[b]))]
    merges = train_bpe(words, vocab_size - len(first_ids) - len(base))
    tokens = list(first_ids) + base + [a + b for a, b in merges]
    vocab = {}
    for token in tokens:
        vocab.setdefault(token, len(vocab))
    return vocab, merges


def bpe_model(vocab, merges, merges_as_pairs, **fields):
    return {
        "type": "BPE", "dropout": None, "unk_token": None, **fields, "fuse_unk": False, "byte_fallback": False,
        "ignore_merges": False, "vocab": vocab,
        "merges": [list(m) for m in merges] if merges_as_pairs else [f"{a} {b}" for a, b in merges],
    }


def template(single, pair, specials):
    def item(x):
        name, type_id = x.rsplit(":", 1)
        key = "Sequence" if name.startswith("$") else "SpecialToken"
        return {key: {"id": name.lstrip("$"), "type_id": int(type_id)}}

    return {
        "type": "TemplateProcessing",
        "single": [item(x) for x in single.split()],
        "pair": [item(x) for x in pair.split()],
        "special_tokens": {name: {"id": name, "ids": [i], "tokens": [name]} for name, i in specials},
    }


def make_modernbert(shared_dir, model_max_length):
    # OLMo's tokenizer (GPT-NeoX's, eos moved) as ModernBERT ships it, the BPE part trained here:
    # |||IP_ADDRESS||| and <|padding|> first; after the BPE tokens, runs of 24 down to 2 spaces
    # (added tokens matched in normalized text), |||EMAIL_ADDRESS|||, |||PHONE_NUMBER|||,
    # <|endoftext|>, ModernBERT's [UNK] [CLS] [SEP] [PAD] [MASK] and [unused0] .. [unused82].
    vocab, merges = train_byte_level(training_texts(shared_dir), GPT2_PATTERN, 4000, ["|||IP_ADDRESS|||", "<|padding|>"])
    n = len(vocab)
    added = [added_token(0, "|||IP_ADDRESS|||", special=False, normalized=True), added_token(1, "<|padding|>")]
    added += [added_token(n + k, " " * (24 - k), special=False, normalized=True) for k in range(23)]
    n += 23
    added += [added_token(n, "|||EMAIL_ADDRESS|||", special=False, normalized=True), added_token(n + 1, "|||PHONE_NUMBER|||", special=False, normalized=True), added_token(n + 2, "<|endoftext|>")]
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"] + [f"[unused{k}]" for k in range(83)]
    added += [added_token(n + 3 + k, c, lstrip=c == "[MASK]") for k, c in enumerate(specials)]
    for t in added:
        vocab.setdefault(t["content"], t["id"])
    assert all(vocab[t["content"]] == t["id"] for t in added)
    ids = {t["content"]: t["id"] for t in added}
    byte_level_step = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": byte_level_step,
        "post_processor": template("[CLS]:0 $A:0 [SEP]:0", "[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", [("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])]),
        "decoder": byte_level_step,
        "model": bpe_model(vocab, merges, False, continuing_subword_prefix=None, end_of_word_suffix=None),
    }

    def special(name):
        return {"content": name, "lstrip": name == "[MASK]", "normalized": False, "rstrip": False, "single_word": False}

    special_tokens_map = {f"{role}_token": special(name) for role, name in (("cls", "[CLS]"), ("mask", "[MASK]"), ("pad", "[PAD]"), ("sep", "[SEP]"), ("unk", "[UNK]"))}
    tokenizer_config = {
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
        "clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "mask_token": "[MASK]",
        "model_input_names": ["input_ids", "attention_mask"], "model_max_length": model_max_length,
        "pad_token": "[PAD]", "sep_token": "[SEP]", "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
    }
    tok = ByteLevelBpeTokenizer("modernbert", GPT2_PATTERN, vocab, merges, added)
    tok.files = {
        "tokenizer.json": _json_bytes(tokenizer),
        "tokenizer_config.json": _json_bytes(tokenizer_config),
        "special_tokens_map.json": _json_bytes(special_tokens_map),
    }
    tok.pad_id = ids["[PAD]"]
    cls, sep = ids["[CLS]"], ids["[SEP]"]
    tok._set_template([cls], [sep], ([cls], [sep], [sep]), 1)
    return tok


QWEN_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True), ("<|quad_start|>", True),
    ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]


def make_qwen3(shared_dir, model_max_length, appends_end=True, whole_words=()):
    # Qwen2's tokenizer as Qwen3-Embedding ships it, the BPE part trained here: the BPE tokens, then
    # <|endoftext|> (pad, and appended by the post-processor), <|im_start|>, <|im_end|> (eos), ...
    # Qwen3-Reranker ships Qwen3's own (`appends_end=False`): a ByteLevel post-processor that adds
    # nothing. `whole_words` become single tokens, as in the real vocabulary ("yes", "no"), by merges
    # appended after the trained ones.
    vocab, merges = train_byte_level(training_texts(shared_dir), QWEN2_PATTERN, 4000, [])
    for word in whole_words:
        merges, vocab = _merged_whole(word, merges, vocab)
    n = len(vocab)
    added = [added_token(n + k, c, special=sp) for k, (c, sp) in enumerate(QWEN_ADDED)]
    eot = added[0]["id"]
    byte_level_step = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level_step,
        ]},
        "post_processor": (template("$A:0 <|endoftext|>:0", "$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1", [("<|endoftext|>", eot)])
                           if appends_end else byte_level_step),
        "decoder": byte_level_step,
        "model": bpe_model(vocab, merges, True, continuing_subword_prefix="", end_of_word_suffix=""),
    }
    tokenizer_config = {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
        "additional_special_tokens": [c for c, sp in QWEN_ADDED[1:14]],
        "bos_token": None, "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": model_max_length, "pad_token": "<|endoftext|>", "padding_side": "left",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    special_tokens_map = {
        "additional_special_tokens": tokenizer_config["additional_special_tokens"],
        "eos_token": {"content": "<|im_end|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
        "pad_token": {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
    }
    by_id = sorted(vocab, key=vocab.get)
    tok = ByteLevelBpeTokenizer("qwen3", QWEN2_PATTERN, vocab, merges, added)
    tok.files = {
        "tokenizer.json": _json_bytes(tokenizer),
        "tokenizer_config.json": _json_bytes(tokenizer_config),
        "special_tokens_map.json": _json_bytes(special_tokens_map),
        "vocab.json": (json.dumps({t: vocab[t] for t in by_id}, ensure_ascii=False) + "\n").encode("utf-8"),
        "merges.txt": ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)).encode("utf-8"),
    }
    tok.pad_id = eot
    if appends_end:
        tok._set_template([], [eot], ([], [eot], [eot]), 1)
    else:
        tok._set_template([], [], ([], [], []), 0)
    return tok


# CLIP's pre-tokenizer regex (transformers' CLIPConverter): contractions, letter runs, single
# digits, runs of anything else; whitespace between the matches is dropped.
CLIP_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
CLIP_SUFFIX = "</w>"


def clip_normalize(text):
    """NFC, runs of whitespace to one space, lowercase (per character, as HF tokenizers does)."""
    text = regex.sub(r"\s+", " ", unicodedata.normalize("NFC", text))
    return "".join(ch.lower() for ch in text)


class ClipTokenizer(StandInTokenizer):
    """
    CLIP's fast tokenizer: added tokens split out (matched in the normalized text), the normalizer
    above, the CLIP regex (matches kept), bytes to GPT-2's characters, BPE whose word-final symbols
    carry `</w>`; `<|startoftext|> A <|endoftext|>`.
    """

    def __init__(self, vocab, merges, added_tokens):
        self.kind = "clip"
        self.bpe = ByteLevelBpe(vocab, merges)
        self.added = AddedTokens(added_tokens)
        self.vocab_size = len(vocab)

    def encode(self, text):
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
                continue
            for sub, sub_token in AddedTokens.split(clip_normalize(piece), self.added.normalized):
                if sub_token is not None:
                    ids.append(sub_token["id"])
                    continue
                for word in regex.findall(CLIP_PATTERN, sub):
                    ids.extend(self.bpe.word(byte_level(word), CLIP_SUFFIX))
        return ids


def train_clip_bpe(texts, vocab_size):
    """CLIP's vocabulary layout: the 256 byte symbols, the same with `</w>`, the merges, then
    `<|startoftext|>` and `<|endoftext|>` as the last two ids (the end token must be the largest id:
    the text model pools at argmax(input_ids))."""
    words = {}
    for text in texts + EDGE_TEXTS * 5:
        for word in regex.findall(CLIP_PATTERN, clip_normalize(text)):
            symbols = list(byte_level(word))
            symbols[-1] += CLIP_SUFFIX
            words[tuple(symbols)] = words.get(tuple(symbols), 0) + 1
    base = list(BYTE_CHARS.values())
    base += [c + CLIP_SUFFIX for c in base]
    merges = train_bpe(words, vocab_size - len(base) - 2)
    vocab = {}
    for token in base + [a + b for a, b in merges]:
        vocab.setdefault(token, len(vocab))
    return vocab, merges


def make_clip(shared_dir, model_max_length):
    # openai/clip-vit-base-patch32's tokenizer (as transformers converts CLIPTokenizer), the BPE part
    # trained here; Xenova's CLIP repositories ship the same files.
    vocab, merges = train_clip_bpe(training_texts(shared_dir), 4096)
    n = len(vocab)
    added = [added_token(n, "<|startoftext|>", normalized=True), added_token(n + 1, "<|endoftext|>", normalized=True)]
    for t in added:
        vocab[t["content"]] = t["id"]
    bos, eos = n, n + 1
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFC"},
            {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
            {"type": "Lowercase"},
        ]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": CLIP_PATTERN}, "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ]},
        "post_processor": {"type": "RobertaProcessing", "sep": ["<|endoftext|>", eos], "cls": ["<|startoftext|>", bos],
                           "trim_offsets": False, "add_prefix_space": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": bpe_model(vocab, merges, False, continuing_subword_prefix="", end_of_word_suffix=CLIP_SUFFIX)
        | {"unk_token": "<|endoftext|>"},
    }

    def special(name):
        return {"content": name, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}

    special_tokens_map = {"bos_token": special("<|startoftext|>"), "eos_token": special("<|endoftext|>"),
                          "pad_token": "<|endoftext|>", "unk_token": special("<|endoftext|>")}
    tokenizer_config = {
        "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
        "bos_token": "<|startoftext|>", "clean_up_tokenization_spaces": True, "do_lower_case": True,
        "eos_token": "<|endoftext|>", "errors": "replace", "model_max_length": model_max_length,
        "pad_token": "<|endoftext|>", "tokenizer_class": "CLIPTokenizer", "unk_token": "<|endoftext|>",
    }
    tok = ClipTokenizer(vocab, merges, added)
    by_id = sorted(vocab, key=vocab.get)
    tok.files = {
        "tokenizer.json": _json_bytes(tokenizer),
        "tokenizer_config.json": _json_bytes(tokenizer_config),
        "special_tokens_map.json": _json_bytes(special_tokens_map),
        "vocab.json": (json.dumps({t: vocab[t] for t in by_id}, ensure_ascii=False) + "\n").encode("utf-8"),
        "merges.txt": ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)).encode("utf-8"),
    }
    tok.pad_id = eos
    tok.bos_id, tok.eos_id = bos, eos
    tok._set_template([bos], [eos], ([bos], [eos, eos], [eos]), 0)
    return tok


def _merged_whole(word, merges, vocab):
    """Merges (and vocabulary entries) that make `word`'s byte-level pieces one token: the pieces
    the trained merges leave, joined left to right."""
    symbols = ByteLevelBpe(vocab, merges).word(byte_level(word))
    by_id = {i: p for p, i in vocab.items()}
    parts = [by_id[i] for i in symbols]
    merges, vocab = list(merges), dict(vocab)
    while len(parts) > 1:
        merges.append((parts[0], parts[1]))
        parts = [parts[0] + parts[1]] + parts[2:]
        vocab.setdefault(parts[0], len(vocab))
    return merges, vocab


# ----------------------------------------------------------------------------
# Gemma: SentencePiece BPE (no byte-level alphabet) with byte fallback, as transformers converts it.
# ----------------------------------------------------------------------------
METASPACE = "\u2581"
GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[@BOS@]"] + [f"<unused{i}>" for i in range(8)] + [
    "<start_of_turn>", "<end_of_turn>"]
# A word as the stand-in's vocabulary is trained on: a run of U+2581 and what follows up to the next one.
GEMMA_WORD = "\u2581*[^\u2581]+|\u2581+"


class GemmaTokenizer(StandInTokenizer):
    """
    Ids as HF tokenizers gives them with the tokenizer.json written here: added tokens split out
    (raw text), spaces replaced by U+2581 (no prefix is added), BPE on the whole piece by merge
    rank, a symbol outside the vocabulary as its UTF-8 bytes' `<0xXX>` tokens. Every token of the
    trained vocabulary is a U+2581 run and then characters that are not, so no merge joins a
    character to a U+2581 after it: BPE on each word (GEMMA_WORD) gives the ids BPE on the whole
    piece gives, which encode() relies on (and make_gemma() checks).
    """

    def __init__(self, vocab, merges, added_tokens):
        self.kind = "gemma"
        self.vocab = vocab
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.added = AddedTokens(added_tokens)
        self.vocab_size = len(vocab)
        self.cache = {}

    def word(self, word):
        if word in self.cache:
            return self.cache[word]
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get(p, 1 << 30), k) for k, p in enumerate(zip(symbols, symbols[1:]))]
            rank, at = min(ranked)
            if rank == 1 << 30:
                break
            # The leftmost pair of that rank merges first; then any other of the same rank, left to right.
            pair = (symbols[at], symbols[at + 1])
            out, k = [], 0
            while k < len(symbols):
                if k + 1 < len(symbols) and (symbols[k], symbols[k + 1]) == pair:
                    out.append(pair[0] + pair[1])
                    k += 2
                else:
                    out.append(symbols[k])
                    k += 1
            symbols = out
        ids = []
        for symbol in symbols:
            if symbol in self.vocab:
                ids.append(self.vocab[symbol])
            else:
                ids.extend(self.vocab[f"<0x{b:02X}>"] for b in symbol.encode("utf-8"))
        self.cache[word] = ids
        return ids

    def pair(self, a, b):
        """`<bos>:0 A:0 <bos>:1 B:1`: the second <bos> is the second sequence's."""
        ids = [self.bos_id] + list(a) + [self.bos_id] + list(b)
        return ids, [0] * (1 + len(a)) + [1] * (1 + len(b))

    def encode(self, text):
        ids = []
        for piece, token in AddedTokens.split(text, self.added.raw):
            if token is not None:
                ids.append(token["id"])
                continue
            for word in regex.findall(GEMMA_WORD, piece.replace(" ", METASPACE)):
                ids.extend(self.word(word))
        return ids


def make_gemma(shared_dir, model_max_length, whole_words=()):
    # google/gemma-2b's tokenizer (bge-reranker-v2-gemma ships it) as transformers' GemmaConverter
    # writes it, the BPE part trained here: <pad> <eos> <bos> <unk> <mask> [@BOS@], unused tokens,
    # <start_of_turn> <end_of_turn>; the 256 byte tokens; the characters; the merges.
    texts = [t.replace(" ", METASPACE) for t in training_texts(shared_dir)]
    counts = {}
    for text in texts:
        for word in regex.findall(GEMMA_WORD, text):
            counts[tuple(word)] = counts.get(tuple(word), 0) + 1
    # Characters seen fewer than twice are left to byte fallback, as sentencepiece's character coverage leaves rare ones.
    seen = {}
    for word, n in counts.items():
        for ch in word:
            seen[ch] = seen.get(ch, 0) + n
    alphabet = sorted({ch for ch, n in seen.items() if n >= 2} | {METASPACE, "\n", "\t"} |
                      {chr(c) for c in range(0x21, 0x7F)})
    words = {tuple(ch if ch in alphabet else "\0" for ch in w): n for w, n in counts.items()}
    merges = [m for m in train_bpe(words, 3000) if "\0" not in m[0] + m[1]]
    tokens = GEMMA_SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + alphabet + [a + b for a, b in merges]
    vocab = {}
    for t in tokens:
        vocab.setdefault(t, len(vocab))
    tok = GemmaTokenizer(vocab, merges, [])
    for word in whole_words:  # single tokens, as in the real vocabulary ("Yes")
        merged = tok.word(word)
        by_id = {i: p for p, i in vocab.items()}
        parts = [by_id[i] for i in merged]
        while len(parts) > 1:
            merges.append((parts[0], parts[1]))
            parts = [parts[0] + parts[1]] + parts[2:]
            vocab.setdefault(parts[0], len(vocab))
    assert all(regex.fullmatch("\u2581*[^\u2581]*", t) for t in vocab if t not in GEMMA_SPECIALS)
    added = [added_token(i, c) for i, c in enumerate(GEMMA_SPECIALS)]
    tok = GemmaTokenizer(vocab, merges, added)
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        "post_processor": template("<bos>:0 $A:0", "<bos>:0 $A:0 <bos>:1 $B:1", [("<bos>", 2)]),
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": METASPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab, "merges": [list(m) for m in merges],
        },
    }
    tokenizer_config = {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
        "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
        "bos_token": "<bos>", "clean_up_tokenization_spaces": False, "eos_token": "<eos>", "legacy": None,
        "model_max_length": model_max_length, "pad_token": "<pad>", "sp_model_kwargs": {},
        "spaces_between_special_tokens": False, "tokenizer_class": "GemmaTokenizer", "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }

    def special(name):
        return {"content": name, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}

    special_tokens_map = {
        "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
        "bos_token": special("<bos>"), "eos_token": special("<eos>"), "pad_token": special("<pad>"),
        "unk_token": special("<unk>"),
    }
    tok.files = {
        "tokenizer.json": _json_bytes(tokenizer),
        "tokenizer_config.json": _json_bytes(tokenizer_config),
        "special_tokens_map.json": _json_bytes(special_tokens_map),
    }
    tok.pad_id, tok.bos_id, tok.eos_id = 0, 2, 1
    tok._set_template([2], [], ([2], [2], []), 1)
    return tok


_MAKERS = {"bert": make_bert, "mpnet": make_mpnet, "xlmr": make_xlmr, "modernbert": make_modernbert, "qwen3": make_qwen3,
           "clip": make_clip, "siglip": make_siglip, "gemma": make_gemma}


def make_tokenizer(kind, shared_dir, model_max_length):
    if kind not in _MAKERS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(KINDS)}")
    return _MAKERS[kind](shared_dir, model_max_length)


# ----------------------------------------------------------------------------
# Texts the ids are checked on, and the CLI that writes files and expected ids.
# ----------------------------------------------------------------------------
EDGE_TEXTS = [
    "", " ", "  \t\n\r  ", "\u00a0\u3000", "\u200b", "a", "A", ".",
    "Hello,   world!\tTabs\nand\r\nnewlines   ",
    "  leading and trailing  ",
    "multiple     spaces  between",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ｔｅｘｔ １２３ ＡＢＣ",
    "ｶﾀｶﾅ ﾊﾝｶｸ",
    "e\u0301 cafe\u0301 n\u0303 a\u030a\u0323 \u0301 leading combining",
    "Ǆ ǅ ǆ ﬁ ﬂ ß ẞ İ ı ΟΔΟΣ Σ ς",
    "👨\u200d👩\u200d👧\u200d👦 family 🏳\ufe0f\u200d🌈 flag 👍🏽 thumbs",
    "control\x01\x02\x7f\x85 chars\x0b\x0c here",
    "replacement \ufffd char \ufffd\ufffd",
    "soft\u00adhyphen zero\u200bwidth joiner\u200dnon\u200cjoiner bom\ufeffhere",
    "Pneumonoultramicroscopicsilicovolcanoconiosis " + "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "supercalifragilisticexpialidocious" * 5,
    "汉字 漢字 𠀀𠀁 ⺀ 中文字符和English混合",
    "日本語のテキスト、句読点。カタカナ！",
    "한국어 텍스트 ㄱㄴㄷ",
    "العربية مع تشكيل: مَرْحَبًا",
    "हिन्दी क्षत्रिय ग़ज़ल",
    "ไทย ภาษาไทย",
    "Ελληνικά ΚΑΛΗΜΕΡΑ",
    "Русский ЁЖИК ёжик",
    "math ∑∫√ ≤≥ ½ ¼ ² ³ ⁴ ₅ № ™ © ℃ Ⅻ ① ㍿",
    "quotes “smart” ‘single’ «guillemets» — dashes – …",
    "code: def f(x): return x**2  # comment\n\tif a != b: pass",
    "URL https://example.com/path?q=1&r=2#frag e-mail a.b@c.de",
    "numbers 3.14159 1,000,000 -42 +7 1e-10 0x1F",
    "[CLS] [SEP] [PAD] [MASK] [UNK] <s> </s> <pad> <unk> <mask> <|endoftext|> <|im_start|>",
    "before <mask> after  <mask>end [MASK]x",
    "\t\t\t",
    "a\u2028b\u2029c\u0085d",
    # NEL is whitespace to HF tokenizers' regexes, BOM is not (JavaScript's \s has it the other way).
    "a \u0085b c \ufeffd \u0085\u0085 x\ufeff \ufeff é \u0085é",
    # Contractions in any case (Qwen2's pattern is case-insensitive), and the long s that folds to s.
    "IT'S it's It'Ll WE'RE they'VE I'M she'D don'T it'\u017f",
    "\U0001F600\U0001F601 emoji only \u2764\ufe0f",
    "private use \ue000\uf8ff and astral \U000F0000",
]


def training_texts(shared_dir):
    """The shared multilingual texts, then the passages, in file order (training is deterministic)."""
    texts = []
    for name in ("mixed.jsonl", "passages.jsonl"):
        with open(os.path.join(shared_dir, "eval", "texts", name), encoding="utf-8") as f:
            texts.extend(json.loads(line)["text"] for line in f if line.strip())
    return texts


def load_texts(shared_dir):
    return training_texts(shared_dir) + EDGE_TEXTS


def expected_for(tok, texts):
    items = []
    for text in texts:
        ids = tok.encode(text)
        assert all(0 <= i < tok.vocab_size for i in ids)
        item = {"text": text, "ids": ids, "single": tok.single(ids)}
        if hasattr(tok, "check_against_sentencepiece"):
            item["sentencepiece_differs"] = tok.check_against_sentencepiece(text)
        items.append(item)
    pairs = []
    # Each text with the next one: pairs of every script and length, some empty.
    for i in range(len(texts)):
        j = (i + 1) % len(texts)
        ids, types = tok.pair(items[i]["ids"], items[j]["ids"])
        pairs.append({"a": i, "b": j, "ids": ids, "type_ids": types})
    return {
        "vocab_size": tok.vocab_size, "pad_id": tok.pad_id,
        "single_specials": tok.single_specials, "pair_specials": tok.pair_specials,
        "items": items, "pairs": pairs,
    }


def write_files(tok, directory):
    for rel, data in tok.files.items():
        path = os.path.join(directory, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write <kind>/ folders and expected.json into")
    parser.add_argument("--shared", required=True, help="the project's shared resources folder")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--model-max-length", type=int, default=512)
    args = parser.parse_args(argv)
    texts = load_texts(args.shared)
    expected = {}
    for kind in args.kinds.split(","):
        tok = make_tokenizer(kind, args.shared, args.model_max_length)
        write_files(tok, os.path.join(args.out, kind))
        expected[kind] = expected_for(tok, texts)
    with open(os.path.join(args.out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
