"""Associative-recall probe (MQAR-style, after the Zoology line of work): does a copy-after-match head form
in the qwen2.py model on this machine, and after how many steps?

Sequence (one token each): n pairs  k1 v1 k2 v2 ... kn vn, then SEP, then q queries  ka va kb vb ...
where every queried key appeared in the pairs; the loss is on the value after each query key only.
Accuracy = argmax at those positions. Keys and values come from disjoint token ranges; pairs are fresh
per sequence (a seeded generator), so the only way to be right is to look the key up in the context.

  nice -n 19 /usr/bin/python3 tools/testbed/mqar.py --steps 1500 --log /tmp/mqar.log
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen2 import Qwen2Config, Qwen2ForCausalLM  # noqa: E402


def batch(g, bs, n_pairs, n_keys, n_vals, n_queries):
    """Returns tokens [bs, 2n+1+2q] and a mask of the positions whose next token is scored."""
    sep = n_keys + n_vals
    rows, masks = [], []
    for _ in range(bs):
        keys = torch.randperm(n_keys, generator=g)[:n_pairs]
        vals = n_keys + torch.randint(n_vals, (n_pairs,), generator=g)
        qi = torch.randint(n_pairs, (n_queries,), generator=g)
        pairs = torch.stack([keys, vals], 1).reshape(-1)
        qs = torch.stack([keys[qi], vals[qi]], 1).reshape(-1)
        row = torch.cat([pairs, torch.tensor([sep]), qs])
        m = torch.zeros(len(row), dtype=torch.bool)
        m[2 * n_pairs + 1::2] = True  # the query keys: predict the value that follows
        rows.append(row)
        masks.append(m)
    return torch.stack(rows), torch.stack(masks)


def copy_batch(g, bs, length, n_tok):
    """The classic induction task: a random sequence of `length` tokens, a random gap of 0..length
    tokens, the same sequence again, random tokens to a common width; scored on the repeat (after its
    first token). The gap varies, so a fixed-offset (positional) head cannot solve it: each next token
    is found by matching the current one in the first copy and copying its successor."""
    W = 3 * length
    x = torch.randint(n_tok, (bs, W), generator=g)
    m = torch.zeros_like(x, dtype=torch.bool)
    for i in range(bs):
        gap = int(torch.randint(length + 1, (1,), generator=g))
        s = length + gap
        x[i, s:s + length] = x[i, :length]
        m[i, s:s + length - 1] = True  # position j predicts token j + 1 inside the repeat
    return x, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--bs", type=int, default=32)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--vals", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--init", choices=["hf", "scaled"], default="hf")
    ap.add_argument("--copy-frac", type=float, default=0.0,
                    help="share of each batch given the copy task (random sequence repeated)")
    ap.add_argument("--copy-len", type=int, default=16)
    ap.add_argument("--log", default="")
    ap.add_argument("--threads", type=int, default=1,
                    help="1 on a busy machine: 2 OpenMP threads on contended cores ran 11x slower")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    g = torch.Generator().manual_seed(a.seed + 1)
    ge = torch.Generator().manual_seed(10_000 + a.seed)
    V = a.keys + a.vals + 1
    c = Qwen2Config(vocab_size=V, hidden_size=a.d, intermediate_size=2 * a.d, num_hidden_layers=a.layers,
                    num_attention_heads=a.heads, num_key_value_heads=a.heads, max_position_embeddings=256,
                    tie_word_embeddings=False, init=a.init)
    m = Qwen2ForCausalLM(c)
    opt = torch.optim.AdamW(m.parameters(), lr=a.lr, weight_decay=a.wd, betas=(0.9, 0.98))
    ev_x, ev_m = batch(ge, 256, a.pairs, a.keys, a.vals, a.queries)
    cv_x, cv_m = copy_batch(ge, 64, a.copy_len, a.keys + a.vals)
    log = open(a.log, "a") if a.log else sys.stdout
    print(f"params {m.num_params()} {vars(a)}", file=log, flush=True)
    t0 = time.time()
    for step in range(1, a.steps + 1):
        lr = a.lr * min(1.0, step / 50)
        for pg in opt.param_groups:
            pg["lr"] = lr
        n_copy = round(a.bs * a.copy_frac)
        loss = 0.0
        for x, msk, w in ([(*batch(g, a.bs - n_copy, a.pairs, a.keys, a.vals, a.queries), 1 - a.copy_frac)]
                          if n_copy < a.bs else []) + \
                         ([(*copy_batch(g, n_copy, a.copy_len, a.keys + a.vals), a.copy_frac)] if n_copy else []):
            logits = m(x[:, :-1])
            tgt = x[:, 1:]
            mk = msk[:, :-1]
            loss = loss + w * F.cross_entropy(logits[mk], tgt[mk])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == 1:
            with torch.no_grad():
                el = m(ev_x[:, :-1])
                emk = ev_m[:, :-1]
                acc = (el[emk].argmax(-1) == ev_x[:, 1:][emk]).float().mean().item()
                cl = m(cv_x[:, :-1])
                cmk = cv_m[:, :-1]
                cacc = (cl[cmk].argmax(-1) == cv_x[:, 1:][cmk]).float().mean().item()
            print(f"step {step} loss {loss.item():.4f} lookup_acc {acc:.3f} copy_acc {cacc:.3f} "
                  f"t {time.time() - t0:.0f}s",
                  file=log, flush=True)


if __name__ == "__main__":
    main()
