"""Trains the testbed model (qwen2.py) on generated problems (gen.py) tokenised by the testbed BPE (bpe.py).

Recipe levers from the probes (tools/testbed/README.md): loss on trace tokens only; a curriculum on the
number of facts and of terms; a pure look-up task mixed into every batch (facts, then "Look up: start at NAME, N steps."
and a trace of look-up lines only); full attention heads; the learning rate held at its peak (no decay)
until the look-up accuracy passes --hold-until, then cosine to 10 %. Seeded: the batch of step s is a
function of (seed, s), so a resumed run sees the same data as an uninterrupted one.

Checkpoints (model, optimiser, step, RNG-free) go to OUT/ckpt.pt every --ckpt-every steps; rerunning the
same command resumes. Logs: OUT/log.txt (one line per --eval-every steps: loss, teacher-forced accuracy of
the look-up value digit, the arithmetic result digit, the first token of "Wait"/"Alternatively" lines).

  nice -n 19 /usr/bin/python3 tools/testbed/train.py --tokenizer tok.json --out run1 --steps 6000

--fmt 4 (testbed v2) trains on gen.py's format 4 with simulated eviction: for --lost-frac of the walks,
1-3 facts are hidden (qwen2.py's forward(tokens, hide) mask) from the position where their look-up starts,
and the target trace holds the recovery routine there (fmt4_example; tools/testbed/README.md, "Testbed v2").
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402
from bpe import Tokenizer  # noqa: E402
from qwen2 import Qwen2Config, Qwen2ForCausalLM  # noqa: E402


def lookup_problem(rng, n_facts, n_queries):
    """The pure look-up task: facts in the walk's format, linked in one cycle and listed in random order,
    then "Look up: start at NAME, N steps." and a trace of look-up lines only (no sums, no other
    sentences). N <= the number of facts, so the walk never revisits a fact: every line is copied from
    the prompt."""
    ns = gen.names(rng, n_facts)
    nxt = {ns[i]: ns[(i + 1) % n_facts] for i in range(n_facts)}
    fact = {k: rng.randint(1, 9) for k in ns}
    order = ns[:]
    rng.shuffle(order)
    n = min(n_queries, n_facts)
    prompt = ("Facts:\n" + "".join(gen.fact_line(k, nxt[k], fact[k]) + "\n" for k in order)
              + f"Look up: start at {ns[0]}, {n} steps.\n<think>\n")
    lines, cur = [], ns[0]
    for _ in range(n):
        lines.append(gen.fact_line(cur, nxt[cur], fact[cur]))
        cur = nxt[cur]
    return prompt, "\n".join(lines) + "\n", ["lookup"] * len(lines)


def encode_example(tok, prompt, trace, kinds):
    """Token ids, a loss mask (trace tokens and EOS) and, per scored position, a probe label:
    the position whose next token is a look-up value digit / an arithmetic result digit / the first
    token of a Wait or Alternatively line. Digits are single tokens (the Qwen2 pre-tokenizer isolates them)."""
    p_ids = tok.encode(prompt)
    t_ids = tok.encode(trace)
    ids = p_ids + t_ids + [tok.eos]
    # character offset of each trace token
    offs, o = [], 0
    for i in t_ids:
        offs.append(o)
        o += len(tok.piece(i))
    start_of = {c: k for k, c in enumerate(offs)}
    probes = {}
    lines = trace.split("\n")
    o = 0
    for line, kind in zip(lines, kinds):
        if kind == "lookup":  # "bak dor3.": the key, the next name and the digit
            sp = line.index(" ")
            probes[o] = "key"
            probes[o + sp] = "next"
            probes[o + len(line) - 2] = "lookup"
        elif kind == "arith":  # "3+7=0, 24 left.": the result digit and the count
            probes[o + line.index("=") + 1] = "arith"
            probes[o + line.index(", ") + 2] = "left"
        elif kind == "lost" and not line.startswith("Wait"):  # "NAME lost.": the token after the key
            probes[o + line.index(" ")] = kind
        elif kind in ("wait", "alt", "wait0", "lost", "check", "restate"):
            probes[o] = kind
        o += len(line) + 1
    label = [""] * len(ids)
    for c, what in probes.items():
        k = start_of.get(c)
        if k is not None:
            label[len(p_ids) + k - 1] = what  # the position that predicts token k of the trace
    mask = [0] * (len(p_ids) - 1) + [1] * (len(t_ids) + 1)
    return ids, mask, label


def lost_steps(rng, start, nxt, n_steps, frac):
    """Format 4's simulated eviction: with probability `frac`, one to three look-up steps whose fact is
    lost, at distinct names, chosen so that every re-walk line of a recovery is still visible (its trace
    copy is not one that an earlier loss hid)."""
    if rng.random() >= frac or n_steps < 3:
        return set()
    visits, cur = [], start
    for _ in range(n_steps):
        visits.append(cur)
        cur = nxt[cur]
    want = rng.choice((1, 1, 1, 1, 1, 1, 2, 2, 2, 3))
    for _ in range(20):
        cand = sorted(rng.sample(range(1, n_steps), min(want, n_steps - 1)))
        keys = [visits[i] for i in cand]
        if len(set(keys)) != len(keys):
            continue
        ok = True
        for j in cand:
            for t in range(j - j % gen.CHECK_EVERY, j):
                if visits[t] == visits[j] or any(t < i < j and visits[t] == visits[i] for i in cand):
                    ok = False
        if ok:
            return set(cand)
    return set()


def fmt4_example(tok, rng, nf, nt, lost_frac, lost_style="key"):
    """A format-4 walk with simulated eviction: (ids, loss mask, probe labels, hide) where hide is a list of
    (query_from, [key token positions]): from token position query_from on (the position that predicts
    the first token of the "NAME lost." line), the prompt's fact line of NAME and the trace's earlier
    copies of it are masked out of attention. With lost_style "wait" (the first v2 run) the guess after a
    failed recovery has no loss on its name and digit; with "key" it is trained as a best guess (the
    true fact, which the model cannot see), so that the second attempt writes a fact, not "lost"."""
    while True:
        prompt, start, nxt, fact = gen.walk(rng, nf, nt)
        if gen.split_of(prompt) == "train":
            break
    lost = lost_steps(rng, start, nxt, nt, lost_frac)
    lines, kinds, _ = gen.trace4(rng, start, nxt, fact, nt, lost, lost_style)
    trace = "\n".join(lines) + "\n"
    ids, mask, label = encode_example(tok, prompt, trace, kinds)
    if not lost:
        return ids, mask, label, []
    # character start of every token of prompt + trace
    starts, o = [], 0
    for i in ids[:-1]:
        starts.append(o)
        o += len(tok.piece(i))
    tok_at = {c: k for k, c in enumerate(starts)}

    def tokens_in(c0, c1):
        return [k for k, c in enumerate(starts) if c0 <= c < c1]

    # line spans: prompt lines, then trace lines
    spans, o = [], 0
    for ln in prompt.split("\n")[:-1]:
        spans.append((o, ln, "prompt"))
        o += len(ln) + 1
    for ln, kd in zip(lines, kinds):
        spans.append((o, ln, kd))
        o += len(ln) + 1
    hide = []
    for (c0, ln, kd) in spans:
        if kd == "lost":
            key = ln.split(" ")[1] if lost_style == "wait" else ln.split(" ")[0]  # "Wait, NAME is lost."
            q = tok_at[c0] - 1
            hidden = []
            for (d0, l2, k2) in spans:
                if d0 >= c0:
                    break
                if k2 in ("prompt", "lookup", "rewalk", "guess") and l2.startswith(key + " "):
                    hidden += tokens_in(d0, d0 + len(l2) + 1)
            hide.append((q, hidden))
        elif kd == "guess" and lost_style == "wait":  # no loss on the guessed next name and digit (the tokens after the key)
            for k in tokens_in(c0 + ln.index(" "), c0 + len(ln) - 1):
                mask[k - 1] = 0
    return ids, mask, label, hide


def level_ranges(step, a):
    lv = min(1.0, step / max(1, a.curriculum))
    fmax = round(a.facts0 + lv * (a.facts[1] - a.facts0))
    tmax = round(a.terms0 + lv * (a.terms[1] - a.terms0))
    return (min(a.facts[0], fmax), fmax), (min(a.terms[0], tmax), tmax), lv


def make_batch(tok, a, step, rng=None, full=False):
    rng = rng or random.Random(f"train-batch:{a.seed}:{step}")
    fr, tr, _ = level_ranges(10 ** 9 if full else step, a)
    exs = []
    for b in range(a.bs):
        nf = rng.randint(*fr)
        if b < round(a.bs * a.lookup_frac):
            p, t, k = lookup_problem(rng, nf, rng.randint(4, 12))
        elif a.fmt == 4:
            ids, m, lab, hide = fmt4_example(tok, rng, nf, rng.randint(*tr), a.lost_frac, a.lost_style)
            exs.append((ids[:a.ctx], m[:a.ctx - 1], lab[:a.ctx - 1], hide))
            continue
        else:
            while True:
                p, t, _, k = gen.make_problem(rng, nf, rng.randint(*tr))
                if gen.split_of(p) == "train":
                    break
        ids, m, lab = encode_example(tok, p, t, k)
        exs.append((ids[:a.ctx], m[:a.ctx - 1], lab[:a.ctx - 1], []))
    T = max(len(e[0]) for e in exs)
    x = torch.full((len(exs), T), tok.eos, dtype=torch.long)
    mk = torch.zeros((len(exs), T - 1), dtype=torch.bool)
    hide = torch.zeros((len(exs), T - 1, T - 1), dtype=torch.bool) if any(e[3] for e in exs) else None
    labels = []
    for i, (ids, m, lab, hd) in enumerate(exs):
        x[i, :len(ids)] = torch.tensor(ids)
        mk[i, :len(m)] = torch.tensor(m, dtype=torch.bool)
        labels.append(lab)
        for q, keys in hd:
            if q < T - 1 and keys:
                hide[i, q:, torch.tensor([k for k in keys if k < T - 1], dtype=torch.long)] = True
    return x, mk, labels, hide


def make_lookup_rows(tok, a, step):
    """--lookup-rows extra pure look-up sequences, padded only among themselves: they are ~5x shorter than
    a walk, so in their own forward pass they add look-up examples at a fraction of a walk row's cost."""
    rng = random.Random(f"lookup-rows:{a.seed}:{step}")
    fr, _, _ = level_ranges(step, a)
    exs = []
    for _ in range(a.lookup_rows):
        p, t, k = lookup_problem(rng, rng.randint(*fr), rng.randint(4, 12))
        ids, m, _ = encode_example(tok, p, t, k)
        exs.append((ids, m))
    T = max(len(e[0]) for e in exs)
    x = torch.full((len(exs), T), tok.eos, dtype=torch.long)
    mk = torch.zeros((len(exs), T - 1), dtype=torch.bool)
    for i, (ids, m) in enumerate(exs):
        x[i, :len(ids)] = torch.tensor(ids)
        mk[i, :len(m)] = torch.tensor(m, dtype=torch.bool)
    return x, mk


def evaluate(m, batches):
    hit, tot = {}, {}
    with torch.no_grad():
        for x, mk, labels, hide in batches:
            pred = m(x[:, :-1], hide).argmax(-1)
            ok = pred == x[:, 1:]
            for i, lab in enumerate(labels):
                for j, what in enumerate(lab):
                    if what:
                        tot[what] = tot.get(what, 0) + 1
                        hit[what] = hit.get(what, 0) + int(ok[i, j])
            tot["token"] = tot.get("token", 0) + int(mk.sum())
            hit["token"] = hit.get("token", 0) + int((ok & mk).sum())
    return {k: hit[k] / tot[k] for k in sorted(tot)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--bs", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--hold-until", type=float, default=0.98, help="look-up accuracy (digit and next name) that ends the LR hold")
    ap.add_argument("--lookup-frac", type=float, default=0.3)
    ap.add_argument("--lookup-rows", type=int, default=0,
                    help="extra pure look-up sequences per step in their own (short) forward pass")
    ap.add_argument("--facts", type=int, nargs=2, default=[8, 24])
    ap.add_argument("--terms", type=int, nargs=2, default=[12, 40], help="walk steps")
    ap.add_argument("--fmt", type=int, choices=[3, 4], default=3, help="gen.py's format (4: testbed v2)")
    ap.add_argument("--lost-frac", type=float, default=0.5,
                    help="format 4: the fraction of walks with simulated eviction (1-3 lost facts)")
    ap.add_argument("--lost-style", choices=["key", "wait"], default="key",
                    help="format 4's loss detection: 'NAME lost.' (after the key) or 'Wait, NAME is lost.'")
    ap.add_argument("--facts0", type=int, default=3)
    ap.add_argument("--terms0", type=int, default=3)
    ap.add_argument("--curriculum", type=int, default=1200, help="steps to reach the full problem sizes")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1,
                    help="1 on a busy machine: 2 OpenMP threads on contended cores ran 11x slower")
    ap.add_argument("--init", choices=["hf", "scaled"], default="scaled",
                    help="scaled: the copy head forms (README); hf (std 0.02): stuck on the plateau")
    ap.add_argument("--tie", action="store_true", help="tie the LM head to the embeddings")
    ap.add_argument("--init-from", default="",
                    help="a weights-only checkpoint (--save-weights) to continue from when OUT has no ckpt.pt; "
                         "the optimiser starts afresh, with a --warmup ramp of the learning rate")
    ap.add_argument("--save-weights", default="",
                    help="write OUT/ckpt.pt's model, step and config (no optimiser state) to this path and exit")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    tok = Tokenizer(a.tokenizer)
    torch.manual_seed(a.seed)
    c = Qwen2Config(vocab_size=tok.eos + 1, hidden_size=a.d, intermediate_size=a.ffn,
                    num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.heads,
                    max_position_embeddings=a.ctx, tie_word_embeddings=a.tie, init=a.init)
    m = Qwen2ForCausalLM(c)
    opt = torch.optim.AdamW(m.parameters(), lr=a.lr, weight_decay=0.05, betas=(0.9, 0.98))
    ck = os.path.join(a.out, "ckpt.pt")
    step, decay_from, warm_from = 0, None, 0
    if os.path.exists(ck):
        s = torch.load(ck)
        m.load_state_dict(s["model"])
        opt.load_state_dict(s["opt"])
        step, decay_from = s["step"], s["decay_from"]
        if a.save_weights:
            torch.save({"model": m.state_dict(), "step": step, "decay_from": decay_from, "config": c.__dict__},
                       a.save_weights)
            return
    elif a.init_from:
        s = torch.load(a.init_from)
        m.load_state_dict(s["model"])
        step, decay_from = s["step"], s["decay_from"]
        warm_from = step  # fresh Adam moments: ramp the learning rate up again
    log = open(os.path.join(a.out, "log.txt"), "a")
    print(f"# {json.dumps(vars(a))} params {m.num_params()} resume_step {step}", file=log, flush=True)
    t0 = time.time()
    while step < a.steps:
        step += 1
        if step - warm_from <= a.warmup:
            lr = a.lr * (step - warm_from) / a.warmup
        elif decay_from is None:
            lr = a.lr
        else:
            f = min(1.0, (step - decay_from) / max(1, a.steps - decay_from))
            lr = a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * f)))
        for pg in opt.param_groups:
            pg["lr"] = lr
        x, mk, _, hide = make_batch(tok, a, step)
        logits = m(x[:, :-1], hide)
        loss_sum = F.cross_entropy(logits[mk], x[:, 1:][mk], reduction="sum")
        n_tok = mk.sum()
        if a.lookup_rows > 0:
            x2, mk2 = make_lookup_rows(tok, a, step)
            logits2 = m(x2[:, :-1])
            loss_sum = loss_sum + F.cross_entropy(logits2[mk2], x2[:, 1:][mk2], reduction="sum")
            n_tok = n_tok + mk2.sum()
        loss = loss_sum / n_tok
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if step % a.eval_every == 0:
            _, _, lv = level_ranges(step, a)
            cur = [make_batch(tok, a, step, random.Random(f"eval-cur:{a.seed}:{k}")) for k in range(2)]
            acc = evaluate(m, cur)
            looked_up = min(acc.get("lookup", 0), acc.get("next", 0))  # both tokens a look-up copies
            if decay_from is None and step > a.warmup and lv >= 1.0 and looked_up >= a.hold_until:
                decay_from = step
            print(f"step {step} lr {lr:.2e} level {lv:.2f} loss {loss.item():.4f} T {x.shape[1]} "
                  + " ".join(f"{k} {v:.3f}" for k, v in acc.items()) + f" t {time.time() - t0:.0f}s",
                  file=log, flush=True)
        if step % a.ckpt_every == 0 or step == a.steps:
            torch.save({"model": m.state_dict(), "opt": opt.state_dict(), "step": step,
                        "decay_from": decay_from, "config": c.__dict__}, ck + ".tmp")
            os.replace(ck + ".tmp", ck)


if __name__ == "__main__":
    main()
