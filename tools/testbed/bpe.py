"""Learns the testbed's byte-level BPE on generated training text and writes it as a Hugging Face
tokenizer.json that the engine loads (src/tokenizer/load_hf_json.cpp) and `skipkv convert` embeds as a
GGUF gpt2 tokenizer with pre-tokenizer "qwen2".

Pre-tokenization is the Qwen2 regex (hf_export.QWEN2_REGEX). The generated corpus is ASCII, so
\\p{L} = [A-Za-z] and \\p{N} = [0-9] there and Python's `re` splits it exactly as the engine's PCRE2 does
(encode() refuses non-ASCII text rather than approximate). Ids: 0-255 the bytes (GPT-2 byte-to-unicode
pieces, id = byte value), then one id per merge in merge order, then the special <|endoftext|>.

  /usr/bin/python3 tools/testbed/bpe.py --vocab 384 --out tokenizer.json
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_export import QWEN2_REGEX, bytes_to_unicode, tokenizer_json  # noqa: E402
import gen  # noqa: E402

# QWEN2_REGEX with \p{L} -> A-Za-z and \p{N} -> 0-9 (same matches on ASCII text; the corpus has no
# control characters, where Python's \s and PCRE2's differ).
ASCII_REGEX = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]| ?[^\sA-Za-z0-9]+[\r\n]*|"
                         r"\s*[\r\n]+|\s+(?!\S)|\s+")
EOS = "<|endoftext|>"
B2U = bytes_to_unicode()


def pretokenize(text):
    if not text.isascii():
        raise ValueError("bpe.py: the testbed corpus is ASCII; got non-ASCII text")
    return ASCII_REGEX.findall(text)


def learn(texts, vocab_size):
    words = collections.Counter()
    for t in texts:
        words.update(pretokenize(t))
    seqs = {w: [B2U[b] for b in w.encode()] for w in words}
    merges = []
    while 256 + len(merges) < vocab_size - 1:  # one id left for EOS
        pairs = collections.Counter()
        for w, f in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += f
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        for w in words:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


def build(merges):
    vocab = {B2U[b]: b for b in range(256)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    return vocab


class Tokenizer:
    """Encodes exactly like the engine's byte-level BPE (lowest-rank merge first within a pre-token)."""

    def __init__(self, path):
        j = json.load(open(path))
        self.vocab = j["model"]["vocab"]
        self.rank = {tuple(m.split(" ")): r for r, m in enumerate(j["model"]["merges"])}
        self.inv = {i: p for p, i in self.vocab.items()}
        self.u2b = {u: b for b, u in B2U.items()}
        self.eos = next(a["id"] for a in j["added_tokens"] if a["content"] == EOS)
        self.inv[self.eos] = EOS

    def encode(self, text):
        ids = []
        for w in pretokenize(text):
            s = [B2U[b] for b in w.encode()]
            while len(s) > 1:
                best = min(range(len(s) - 1), key=lambda i: self.rank.get((s[i], s[i + 1]), 1 << 30))
                if (s[best], s[best + 1]) not in self.rank:
                    break
                s = s[:best] + [s[best] + s[best + 1]] + s[best + 2:]
            ids += [self.vocab[p] for p in s]
        return ids

    def decode(self, ids):
        return b"".join(EOS.encode() if i == self.eos else bytes(self.u2b[c] for c in self.inv[i])
                        for i in ids).decode()

    def piece(self, i):
        return self.decode([i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--problems", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = gen.generate("train", a.problems, a.seed)
    merges = learn([p["prompt"] + p["trace"] for p in probs], a.vocab)
    vocab = build(merges)
    j = tokenizer_json(vocab, merges, [(len(vocab), EOS)])
    with open(a.out, "w") as f:
        json.dump(j, f, ensure_ascii=False)
    tok = Tokenizer(a.out)
    # The ids the KV methods rely on must exist as whole tokens.
    for must in ["Wait", "Alternatively", ".\n", ".\n\n"]:
        ids = tok.encode(must)
        print(f"{must!r:>18} -> {ids} {[tok.piece(i) for i in ids]}")
    # Each name is one token wherever it occurs (" name"), so a look-up is a one-token match.
    # A fact's key is the name at a line start ("bak: +3 go dor."), a token of its own; every other
    # mention is " name". Both must be single tokens, and different ones.
    split = [n for n in gen.NAME_POOL if len(tok.encode(" " + n)) != 1 or len(tok.encode("\n" + n)) != 2]
    if split:
        sys.exit(f"bpe.py: names not learned as single tokens at --vocab {a.vocab}: {split}")
    n = [len(tok.encode(p["prompt"] + p["trace"])) for p in probs[:100]]
    print(f"vocab {len(vocab) + 1}, merges {len(merges)}; tokens per problem: min {min(n)} "
          f"mean {sum(n) / len(n):.0f} max {max(n)}")


if __name__ == "__main__":
    main()
