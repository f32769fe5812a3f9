"""Exports a train.py checkpoint as a Hugging Face directory (config.json, model.safetensors,
tokenizer.json with <|endoftext|> as EOS); then `skipkv convert DIR -o testbed.gguf` makes the GGUF.

  /usr/bin/python3 tools/testbed/export.py --ckpt run1/ckpt.pt --tokenizer tools/testbed/tokenizer.json \\
      --out run1/hf
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import EOS, Tokenizer  # noqa: E402
from hf_export import export  # noqa: E402
from qwen2 import Qwen2Config, Qwen2ForCausalLM  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    s = torch.load(a.ckpt)
    c = Qwen2Config(**s["config"])
    m = Qwen2ForCausalLM(c)
    m.load_state_dict(s["model"])
    tok = Tokenizer(a.tokenizer)
    export(m, a.out, json.load(open(a.tokenizer)), eos_text=EOS, eos_id=tok.eos)
    print(f"wrote {a.out} (step {s['step']}, {m.num_params()} parameters)")


if __name__ == "__main__":
    main()
