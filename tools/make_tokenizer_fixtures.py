#!/usr/bin/env python3
"""Writes the tokenizer test fixtures of tests/llm/data: small vocabularies as GGUF files (the
tokenizer.ggml.* metadata only, as llama.cpp's converter writes it) and, for each, the token ids
of test texts as the reference tokenizers give them.

    /usr/bin/python3 tools/make_tokenizer_fixtures.py tests/llm/data

- spm.gguf / spm.json: a SentencePiece BPE model trained here with python3-sentencepiece (byte
  fallback, no normalization, the dummy space prefix: what Llama's tokenizer.model has), ids by
  sentencepiece itself.
- bpe_llama3.gguf, bpe_qwen2.gguf, bpe_gpt2.gguf / .json: one byte-level BPE vocabulary (merges
  learnt here) with Llama 3's, Qwen2's and GPT-2's pre-tokenizers; ids by the reference below,
  which splits with the `regex` module (python3-regex) and the pre-tokenizers' own patterns, and
  merges as GPT-2's encoder.py does.

Needs Debian's python3-sentencepiece and python3-regex (tools/setup.sh installs both).
"""
import json
import os
import struct
import sys
import tempfile

import regex
import sentencepiece as spm

PATTERNS = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}

CORPUS = """The quick brown fox jumps over the lazy dog. It's a dog's life; they'll say we've
done it, I'm sure you're right and he'd agree. Numbers: 1, 12, 123, 1234, 2026, 3.14159.
Naïve café owners in Zürich drink crème brûlée. Ελληνικά γράμματα. Русский текст здесь.
def main(args):
    for i in range(10):
        print(i * 2)  # twice
    return {"key": [1, 2, 3]}
Hello, world! Hello world!! hello   world?   The the THE tHe.
Once upon a time, there was a little llama who lived in the mountains.
"""

TEXTS = [
    "",
    "Hello world",
    "Hello, world! The quick brown fox.",
    "  leading spaces and trailing   ",
    "multiple     spaces     here",
    "tabs\tand\nnewlines\r\n\n  mixed \t\n",
    "\n\n\n",
    " ",
    "naïve café déjà vu",
    "日本語のテキストです",
    "emoji 🦙🚀 and 👩\u200d👩\u200d👧 family",
    "Ελληνικά και русский",
    "numbers 1234567 and 3.14159, 42",
    "contractions: I'm, you're, they'll, it's, we've, he'd, DON'T, 'S, 'ſ",
    "punctuation!!! ??? ... --- (brackets) [x] {y}",
    "mixed\u00a0nbsp\u3000ideographic space",
    "x" * 300,
    "def f(x):\n    return x**2  # comment\n",
    "a\u0301 combining, ①②③ circled, ¼ fraction, Ⅻ roman",
    "\x01\x7f control bytes",
]

# Texts with special tokens, for the byte-level vocabulary (encoded with parse_special).
SPECIAL_TEXTS = [
    "<|begin_of_text|>Hello<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant",
    "no <|unknown|> token, but <think> is user-defined",
]

GGUF_TYPES = {"u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8, "arr": 9}


def gguf(path, meta):
    """A GGUF v3 file with metadata only (no tensors)."""

    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def value(t, v):
        if t == "str":
            return s(v)
        if t == "u32":
            return struct.pack("<I", v)
        if t == "i32":
            return struct.pack("<i", v)
        if t == "f32":
            return struct.pack("<f", v)
        if t == "bool":
            return struct.pack("<B", 1 if v else 0)
        raise ValueError(t)

    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)))
    for key, (t, v) in meta.items():
        out += s(key)
        if isinstance(v, list):
            out += struct.pack("<IIQ", GGUF_TYPES["arr"], GGUF_TYPES[t], len(v))
            for x in v:
                out += value(t, x)
        else:
            out += struct.pack("<I", GGUF_TYPES[t]) + value(t, v)
    with open(path, "wb") as f:
        f.write(out)


# ---- SentencePiece ------------------------------------------------------------------------


def make_spm(out):
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            for _ in range(20):
                f.write(CORPUS)
        spm.SentencePieceTrainer.train(
            input=corpus,
            model_prefix=os.path.join(tmp, "m"),
            vocab_size=420,
            model_type="bpe",
            character_coverage=1.0,
            byte_fallback=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            add_dummy_prefix=True,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            unk_id=0,
            bos_id=1,
            eos_id=2,
            minloglevel=2,
        )
        sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, "m.model"))
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        t = 1
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_unused(i):
            t = 5
        elif sp.is_byte(i):
            t = 6
        types.append(t)
    meta = {
        "general.architecture": ("str", "llama"),
        "tokenizer.ggml.model": ("str", "llama"),
        "tokenizer.ggml.tokens": ("str", tokens),
        "tokenizer.ggml.scores": ("f32", scores),
        "tokenizer.ggml.token_type": ("i32", types),
        "tokenizer.ggml.bos_token_id": ("u32", 1),
        "tokenizer.ggml.eos_token_id": ("u32", 2),
        "tokenizer.ggml.unknown_token_id": ("u32", 0),
        "tokenizer.ggml.add_bos_token": ("bool", True),
        "tokenizer.ggml.add_eos_token": ("bool", False),
    }
    gguf(os.path.join(out, "spm.gguf"), meta)
    cases = []
    for text in TEXTS:
        ids = sp.encode(text)
        cases.append({"text": text, "ids": [1] + ids, "decoded": sp.decode(ids)})
    write_json(os.path.join(out, "spm.json"), {"bos": 1, "cases": cases})
    return sp


# ---- byte-level BPE -------------------------------------------------------------------------


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()


def mapped(s):
    return "".join(B2U[b] for b in s.encode("utf-8"))


def train_bpe(n_merges):
    words = {}
    for w in regex.findall(PATTERNS["llama3"], CORPUS * 3):
        words[tuple(mapped(w))] = words.get(tuple(mapped(w)), 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        new = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] = new.get(tuple(out), 0) + c
        words = new
    return merges


class ByteBpe:
    """The reference: pre-tokenizer regex, bytes as characters, GPT-2's merge loop."""

    def __init__(self, vocab, merges, pattern, ignore_merges, specials):
        self.vocab, self.pattern, self.ignore_merges = vocab, pattern, ignore_merges
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.specials = sorted(specials, key=len, reverse=True)

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [word]
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, _ = min(pairs)
            if rank == 1 << 30:
                break
            a, b = next((parts[i], parts[i + 1]) for r, i in pairs if r == rank)
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        return parts

    def encode_plain(self, text):
        ids = []
        for piece in regex.findall(self.pattern, text):
            ids += [self.vocab[p] for p in self.bpe(mapped(piece))]
        return ids

    def encode(self, text, specials):
        """Special tokens found leftmost first, the longest at a position."""
        ids, start, i = [], 0, 0
        while i < len(text):
            hit = next((s for s in specials if text.startswith(s, i)), None) if specials else None
            if hit:
                ids += self.encode_plain(text[start:i]) + [self.vocab[hit]]
                i = start = i + len(hit)
            else:
                i += 1
        return ids + self.encode_plain(text[start:])


def make_bpe(out):
    merges = train_bpe(360)
    tokens = [B2U[b] for b in range(256)]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    control = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
               "<|eot_id|>"]
    user = ["<think>"]
    types = [1] * len(tokens) + [3] * len(control) + [4] * len(user)
    tokens += control + user
    vocab = {t: i for i, t in enumerate(tokens)}
    merge_strings = [a + " " + b for a, b in merges]
    for pre, name, bos_add, ignore in (("llama-bpe", "llama3", True, True),
                                      ("qwen2", "qwen2", False, False),
                                      ("default", "gpt2", False, False)):
        meta = {
            "general.architecture": ("str", "llama"),
            "tokenizer.ggml.model": ("str", "gpt2"),
            "tokenizer.ggml.pre": ("str", pre),
            "tokenizer.ggml.tokens": ("str", tokens),
            "tokenizer.ggml.token_type": ("i32", types),
            "tokenizer.ggml.merges": ("str", merge_strings),
            "tokenizer.ggml.bos_token_id": ("u32", vocab["<|begin_of_text|>"]),
            "tokenizer.ggml.eos_token_id": ("u32", vocab["<|end_of_text|>"]),
            "tokenizer.ggml.add_bos_token": ("bool", bos_add),
        }
        gguf(os.path.join(out, f"bpe_{name}.gguf"), meta)
        ref = ByteBpe(vocab, merges, PATTERNS[name], ignore, control + user)
        bos = [vocab["<|begin_of_text|>"]] if bos_add else []
        cases = [{"text": t, "ids": bos + ref.encode(t, user)} for t in TEXTS]
        cases += [{"text": t, "ids": bos + ref.encode(t, control + user), "special": True}
                  for t in SPECIAL_TEXTS]
        cases += [{"text": t, "ids": bos + ref.encode(t, user), "special": False}
                  for t in SPECIAL_TEXTS]
        pieces = [regex.findall(PATTERNS[name], t) for t in TEXTS]
        write_json(os.path.join(out, f"bpe_{name}.json"),
                   {"bos": bos, "cases": cases, "pieces": [{"text": t, "pieces": p} for t, p in zip(TEXTS, pieces)]})


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True, indent=0)
        f.write("\n")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    make_spm(out)
    make_bpe(out)
    for n in sorted(os.listdir(out)):
        print(n, os.path.getsize(os.path.join(out, n)))


if __name__ == "__main__":
    main()
