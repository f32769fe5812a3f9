"""Checks that the trainer's forward (qwen2.py) is the engine's forward: a small random Qwen2 model
(GQA, biases, untied head, non-trivial weights so logits are far from uniform) is exported as a HF
directory, converted with `skipkv convert`, and the engine's perplexity of a text (full KV in f32,
one window, no BOS) is compared with PyTorch's on the very same token ids (from `skipkv tokenize`).
A wrong causal mask, RoPE layout or position offset changes the perplexity by far more than the tolerance.

  /usr/bin/python3 tools/testbed/check_forward.py --skipkv build/apps/skipkv/skipkv
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2 import Qwen2Config, Qwen2ForCausalLM, rope_tables  # noqa: E402
from hf_export import bytes_to_unicode, export, tokenizer_json  # noqa: E402

TEXT = ("Alice has 3 apples.\nBob has 5 pears.\n\nWait, Alice has 3 apples.\n"
        "Alternatively, count again: 3+5=8.\n\\boxed{8}\n") * 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skipkv", default="build/apps/skipkv/skipkv")
    ap.add_argument("--tol", type=float, default=2e-4, help="max relative difference of the perplexity")
    a = ap.parse_args()
    torch.manual_seed(1234)
    torch.set_num_threads(2)
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    c = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                    rope_theta=10000.0, tie_word_embeddings=False)
    m = Qwen2ForCausalLM(c)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.5 * torch.randn_like(p))  # q/k/v biases
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]) * 1.5)
    with tempfile.TemporaryDirectory() as d:
        hf = os.path.join(d, "hf")
        export(m, hf, tokenizer_json(vocab, [], []))
        gguf = os.path.join(d, "m.gguf")
        subprocess.run([a.skipkv, "convert", hf, "-o", gguf, "-q"], check=True)
        txt = os.path.join(d, "t.txt")
        with open(txt, "w") as f:
            f.write(TEXT)
        ids = subprocess.run([a.skipkv, "tokenize", "-m", gguf, "--no-bos", "--ids-only", "-f", txt],
                             check=True, capture_output=True, text=True).stdout.split()
        ids = [int(x) for x in ids]
        assert ids == list(TEXT.encode()), "byte tokenizer ids differ from the text's bytes"
        n = len(ids)
        out = subprocess.run([a.skipkv, "perplexity", "-m", gguf, "-f", txt, "-c", str(n), "--no-bos",
                              "--kv-type", "f32", "-t", "2", "--json"], check=True, capture_output=True,
                             text=True).stdout
        eng = json.loads(out.strip().splitlines()[-1])
        with torch.no_grad():
            t = torch.tensor([ids])
            logits = m(t)[0, :-1].double()
            nll = torch.nn.functional.cross_entropy(logits, t[0, 1:], reduction="mean").item()
        ppl_torch = math.exp(nll)
        ppl_eng = eng["ppl"] if "ppl" in eng else eng["perplexity"]
        rel = abs(ppl_eng - ppl_torch) / ppl_torch
        print(f"tokens {n}  ppl torch {ppl_torch:.6f}  engine {ppl_eng:.6f}  rel diff {rel:.2e}")
        # Sensitivity: the same weights with RoPE on the other frequency layout (theta 500000 instead of
        # 10000) must be far off, or the comparison proves nothing.
        with torch.no_grad():
            cos, sin = m.rope_cos.clone(), m.rope_sin.clone()
            c2, s2 = rope_tables(c.head_dim, c.max_position_embeddings, 500000.0)
            m.rope_cos.copy_(c2), m.rope_sin.copy_(s2)
            nll2 = torch.nn.functional.cross_entropy(m(t)[0, :-1].double(), t[0, 1:]).item()
            m.rope_cos.copy_(cos), m.rope_sin.copy_(sin)
        print(f"(sensitivity: RoPE theta 5e5 instead of 1e4 gives ppl {math.exp(nll2):.6f}, rel diff "
              f"{abs(math.exp(nll2) - ppl_torch) / ppl_torch:.2e})")
        if rel > a.tol:
            print("MISMATCH")
            sys.exit(1)
        print("OK")


if __name__ == "__main__":
    main()
