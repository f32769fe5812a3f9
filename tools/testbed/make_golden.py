"""Writes PyTorch's reference logits for the golden tests (which never run Python):

- tests/data/testbed_tiny/: a tiny random-weight Qwen2 model from the testbed trainer (qwen2.py: tied
  embeddings, GQA 4/2, q/k/v biases, non-trivial weights), the testbed tokenizer, and the logits of two
  generated problems — the oracle for tests/golden/testbed_tiny_test.cpp;
- with --ckpt: the trained testbed's logits (refs.txt only) on two test-split problems with their
  reference traces — the oracle for tests/golden/testbed_model_test.cpp, which runs the embedded GGUF.

  /usr/bin/python3 tools/testbed/make_golden.py --tokenizer tools/testbed/tokenizer.json \\
      --out tests/data/testbed_tiny
  /usr/bin/python3 tools/testbed/make_golden.py --tokenizer tools/testbed/tokenizer.json \\
      --ckpt run/ckpt.pt --out data/models/testbed
  /usr/bin/python3 tools/testbed/make_golden.py --tokenizer tools/testbed/tokenizer.json \\
      --ckpt run_v2/ckpt.pt --fmt 4 --out data/models/testbed-v2     # testbed v2: format-4 problems

refs.txt: per sequence, a line "text <hex of the UTF-8 text>", a line "ids <id> ...", then one line per
checked position "pos <p> <logit_0> ... <logit_{V-1}>" (%.6f); 16 positions per sequence, the last included.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402
from bpe import EOS, Tokenizer  # noqa: E402
from hf_export import export  # noqa: E402
from qwen2 import Qwen2Config, Qwen2ForCausalLM  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ckpt", default="", help="a train.py checkpoint: write its refs.txt only")
    ap.add_argument("--fmt", type=int, choices=[3, 4], default=3, help="with --ckpt: gen.py format of the problems")
    a = ap.parse_args()
    torch.manual_seed(4321)
    tok = Tokenizer(a.tokenizer)
    if a.ckpt:
        s = torch.load(a.ckpt)
        m = Qwen2ForCausalLM(Qwen2Config(**s["config"]))
        m.load_state_dict(s["model"])
        probs = gen.generate("test", 2, 0) if a.fmt == 3 else gen.generate("test", 2, 0, terms=gen.TERMS4, fmt=4)
        write_refs(m, tok, probs, a.out)
        return
    c = Qwen2Config(vocab_size=tok.eos + 1, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                    tie_word_embeddings=True)
    m = Qwen2ForCausalLM(c)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]) * 1.5)
    export(m, a.out, json.load(open(a.tokenizer)), eos_text=EOS, eos_id=tok.eos)
    write_refs(m, tok, gen.generate("val", 2, 11, facts=(4, 6), terms=(6, 10)), a.out)


def write_refs(m, tok, problems, out):
    lines = []
    for p in problems:
        text = p["prompt"] + p["trace"]
        ids = tok.encode(text)
        with torch.no_grad():
            logits = m(torch.tensor([ids]))[0]
        n = len(ids)
        pos = sorted(set([0, 1, 2, 3] + [round(i * (n - 1) / 11) for i in range(12)]))
        lines.append("text " + text.encode().hex())
        lines.append("ids " + " ".join(map(str, ids)))
        for q in pos:
            lines.append(f"pos {q} " + " ".join(f"{v:.6f}" for v in logits[q].tolist()))
        print(f"sequence of {n} tokens, {len(pos)} positions")
    with open(os.path.join(out, "refs.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
