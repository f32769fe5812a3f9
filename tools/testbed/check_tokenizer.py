"""Checks the testbed tokenizer against the engine: a tiny random model with the learned tokenizer.json is
exported and converted (`skipkv convert` -> GGUF gpt2 tokenizer, pre-tokenizer qwen2); the engine's ids
for a few generated problems (from the GGUF and from the HF directory) must equal bpe.py's, and the ids
the KV methods rely on must be whole tokens.

  /usr/bin/python3 tools/testbed/check_tokenizer.py --tokenizer tok.json --skipkv build/apps/skipkv/skipkv
"""
import argparse
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402
from bpe import Tokenizer  # noqa: E402
from hf_export import export  # noqa: E402
from qwen2 import Qwen2Config, Qwen2ForCausalLM  # noqa: E402
import json  # noqa: E402


def engine_ids(skipkv, model, text_path):
    out = subprocess.run([skipkv, "tokenize", "-m", model, "--no-bos", "--ids-only", "-f", text_path],
                         check=True, capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--skipkv", default="build/apps/skipkv/skipkv")
    a = ap.parse_args()
    tok = Tokenizer(a.tokenizer)
    bad = 0
    for must in ["Wait", "Alternatively", ".\n", ".\n\n", "\n"]:
        ids = tok.encode(must)
        print(f"{must!r:>18} -> {ids}")
        bad += len(ids) != 1
    c = Qwen2Config(vocab_size=tok.eos + 1, hidden_size=32, intermediate_size=32, num_hidden_layers=1,
                    num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)
    m = Qwen2ForCausalLM(c)
    with tempfile.TemporaryDirectory() as d:
        hf = os.path.join(d, "hf")
        export(m, hf, json.load(open(a.tokenizer)), eos_text="<|endoftext|>", eos_id=tok.eos)
        gguf = os.path.join(d, "m.gguf")
        subprocess.run([a.skipkv, "convert", hf, "-o", gguf, "-q"], check=True)
        for i, p in enumerate(gen.generate("val", 5, 3)):
            text = p["prompt"] + p["trace"]
            path = os.path.join(d, f"t{i}.txt")
            with open(path, "w") as f:
                f.write(text)
            ref = tok.encode(text)
            for name, model in (("gguf", gguf), ("hf", hf)):
                got = engine_ids(a.skipkv, model, path)
                ok = got == ref
                bad += not ok
                print(f"problem {i} ({len(ref)} tokens) {name}: {'same ids' if ok else 'DIFFERENT ids'}")
    print("OK" if bad == 0 else "FAILED")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
