"""Reads a testbed GGUF (f32 tensors, qwen2 architecture, as `skipkv convert` writes it from export.py's HF
directory) back into a qwen2.py model: the warm start of testbed v2 from the committed v1 model, whose
training checkpoint was not kept.

GGUF stores a tensor's dimensions fastest-first (ne = [in, out] for a weight), so the data is a row-major
PyTorch [out, in] tensor as written; the qwen2 architecture is converted without any q/k permutation. The
names are the converter's (src/io/hf_checkpoint.cpp, HfTensorNameToGguf), mapped back to HF's.

  /usr/bin/python3 tools/testbed/gguf_weights.py data/models/testbed/testbed.gguf --check data/models/testbed/refs.txt
      # the loaded model's logits against the trainer's reference logits (make_golden.py's refs.txt)
  /usr/bin/python3 tools/testbed/gguf_weights.py data/models/testbed/testbed.gguf --save v1_weights.pt
      # a weights-only checkpoint for train.py --init-from
"""
import argparse
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2 import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
          "output.weight": "lm_head.weight"}
LAYER = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
         "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
         "attn_output.weight": "self_attn.o_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
         "attn_k.bias": "self_attn.k_proj.bias", "attn_v.bias": "self_attn.v_proj.bias",
         "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
         "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight"}

# GGUF value types: sizes of the fixed-size ones
_FIXED = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    """Returns (metadata dict, {name: np.float32 array in PyTorch layout})."""
    buf = open(path, "rb").read()
    o = 0

    def take(fmt):
        nonlocal o
        v = struct.unpack_from(fmt, buf, o)[0]
        o += struct.calcsize(fmt)
        return v

    def string():
        nonlocal o
        n = take("<Q")
        s = buf[o:o + n].decode("utf-8", "replace")
        o += n
        return s

    def value(t):
        if t in _FIXED:
            return take(_FIXED[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        raise ValueError(f"unknown GGUF value type {t}")

    assert buf[:4] == b"GGUF", "not a GGUF file"
    o = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    assert version >= 2
    md = {}
    for _ in range(n_kv):
        k = string()
        md[k] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        typ, off = take("<I"), take("<Q")
        infos.append((name, ne, typ, off))
    align = md.get("general.alignment", 32)
    base = (o + align - 1) // align * align
    out = {}
    for name, ne, typ, off in infos:
        assert typ == 0, f"{name}: only f32 tensors are read (type {typ})"
        n = int(np.prod(ne))
        a = np.frombuffer(buf, dtype="<f4", count=n, offset=base + off).astype(np.float32)
        out[name] = a.reshape(list(reversed(ne)))
    return md, out


def hf_name(g):
    if g in GLOBAL:
        return GLOBAL[g]
    parts = g.split(".", 2)
    if parts[0] == "blk" and parts[2] in LAYER:
        return f"model.layers.{parts[1]}.{LAYER[parts[2]]}"
    raise KeyError(g)


def load_model(path):
    md, ts = read_gguf(path)
    arch = md["general.architecture"]
    assert arch == "qwen2", arch
    emb = ts["token_embd.weight"]
    c = Qwen2Config(vocab_size=emb.shape[0], hidden_size=emb.shape[1],
                    intermediate_size=md[f"{arch}.feed_forward_length"],
                    num_hidden_layers=md[f"{arch}.block_count"],
                    num_attention_heads=md[f"{arch}.attention.head_count"],
                    num_key_value_heads=md.get(f"{arch}.attention.head_count_kv",
                                               md[f"{arch}.attention.head_count"]),
                    max_position_embeddings=md[f"{arch}.context_length"],
                    rope_theta=float(md.get(f"{arch}.rope.freq_base", 10000.0)),
                    rms_norm_eps=float(md.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
                    tie_word_embeddings="output.weight" not in ts, init="scaled")
    m = Qwen2ForCausalLM(c)
    sd = {hf_name(k): torch.from_numpy(v.copy()) for k, v in ts.items()}
    if c.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and not [k for k in missing if "rope" not in k], (missing, unexpected)
    return m


def check(m, refs):
    """Max |logit difference| against a make_golden.py refs.txt."""
    worst = 0.0
    ids = None
    for line in open(refs):
        key, _, rest = line.partition(" ")
        if key == "ids":
            ids = [int(x) for x in rest.split()]
            with torch.no_grad():
                logits = m(torch.tensor([ids]))[0]
        elif key == "pos":
            v = rest.split()
            p = int(v[0])
            ref = torch.tensor([float(x) for x in v[1:]])
            worst = max(worst, float((logits[p] - ref).abs().max()))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--check", default="", help="a refs.txt of the same model: print the max logit difference")
    ap.add_argument("--save", default="", help="write a weights-only checkpoint (train.py --init-from)")
    a = ap.parse_args()
    m = load_model(a.gguf)
    print(f"loaded {a.gguf}: {m.num_params()} parameters, config {m.config}")
    if a.check:
        d = check(m, a.check)
        print(f"max |logit - ref| = {d:.3g}")
        if d > 1e-3:
            sys.exit(1)
    if a.save:
        torch.save({"model": m.state_dict(), "step": 0, "decay_from": None, "config": m.config.__dict__}, a.save)
        print(f"wrote {a.save}")


if __name__ == "__main__":
    main()
