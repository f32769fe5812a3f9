"""Writes a Hugging Face checkpoint directory by hand (no transformers/safetensors packages needed):
config.json, model.safetensors (an 8-byte little-endian header length, a JSON header, raw little-endian
F32 tensors), tokenizer.json (byte-level BPE) and tokenizer_config.json. `skipkv convert DIR -o X.gguf`
turns the directory into a GGUF with a gpt2-style tokenizer (pre-tokenizer "qwen2").
"""
import json
import os
import struct

import torch

# The Qwen2 pre-tokenizer regex, byte for byte as src/tokenizer/tokenizer.cpp has it, so that the engine
# recognises the HF file's pre-tokenizer as kQwen2 and the GGUF (pre = "qwen2") behaves the same.
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor (written as contiguous F32)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous()
        b = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # keep the data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def tokenizer_json(vocab, merges, specials):
    """vocab: piece (byte-level unicode string) -> id; merges: [(left, right)]; specials: [(id, text)]."""
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in specials],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def export(model, out_dir, tok_json, bos_text=None, eos_text=None, bos_id=None, eos_id=None):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model.config.hf_json(bos_id, eos_id), f, indent=1)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), model.hf_state_dict())
    with open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        json.dump(tok_json, f, ensure_ascii=False)
    cfg = {"add_bos_token": False, "model_max_length": model.config.max_position_embeddings}
    if bos_text:
        cfg["bos_token"] = bos_text
    if eos_text:
        cfg["eos_token"] = eos_text
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
