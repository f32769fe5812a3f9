"""Deterministic, seeded generator of the testbed's reasoning problems (issue 13).

A problem states facts (name=digit) and an expression over the names; the trace solves it one sentence
per line, R1 style, and ends with a \\boxed{} answer:

  Facts:
  bak=3.
  dor=7.
  ...
  Task: bak+dor-fim+bak.
  <think>
  bak=3.                 <- look-up: the fact copied from the prompt in exactly the prompt's format
  Start 3.
  dor=7.
  3+7=0.                 <- running result, mod 10
  Wait, 3+7=0 is right.  <- re-verification, triggered by a result of 0 (visible on the line above)
  <blank line>           <- a paragraph break follows every "Wait" line ("\\n\\n" in the text)
  fim=8.
  Alternatively, 0-8 is 10+0-8.   <- transition, triggered by a subtraction whose left side is smaller
  0-8=2.
  Wait, bak was used before.      <- re-verification, triggered by a name already used in the task
  bak=3.
  2+3=5.
  </think>
  \\boxed{5}

Every sentence kind is triggered by a condition the model can see, so greedy decoding can learn it.
Splits: a problem belongs to the split given by a hash of its prompt text (test 0-1, val 2-3, train
4-99 of 100), so train / val / test never share a prompt, whatever seeds produced them.

  /usr/bin/python3 tools/testbed/gen.py --split test --n 500 --seed 7 --out test.jsonl
"""
import argparse
import hashlib
import json
import random

CONS = "bdfgklmnprstvz"
VOWS = "aeiou"


def names(rng, n):
    """n distinct 3-letter consonant-vowel-consonant names."""
    out = set()
    while len(out) < n:
        out.add(rng.choice(CONS) + rng.choice(VOWS) + rng.choice(CONS))
    return sorted(out, key=lambda s: rng.random())


def split_of(prompt):
    h = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "little") % 100
    return "test" if h < 2 else "val" if h < 4 else "train"


def make_problem(rng, n_facts, n_terms):
    """Returns (prompt, trace, answer, kinds); kinds[i] is the kind of trace line i."""
    ns = names(rng, n_facts)
    val = {k: rng.randrange(10) for k in ns}
    terms = [rng.choice(ns) for _ in range(n_terms)]
    ops = ["+"] + [rng.choice("+-") for _ in range(n_terms - 1)]
    expr = terms[0] + "".join(o + t for o, t in zip(ops[1:], terms[1:]))
    prompt = "Facts:\n" + "".join(f"{k}={val[k]}.\n" for k in ns) + f"Task: {expr}.\n<think>\n"
    lines, kinds = [], []

    def say(s, kind):
        lines.append(s)
        kinds.append(kind)

    acc = None
    used = set()
    for i, (op, t) in enumerate(zip(ops, terms)):
        if t in used:
            say(f"Wait, {t} was used before.", "wait")
            say("", "blank")
        used.add(t)
        say(f"{t}={val[t]}.", "lookup")
        v = val[t]
        if acc is None:
            say(f"Start {v}.", "arith")
            acc = v
            continue
        if op == "-" and acc < v:
            say(f"Alternatively, {acc}-{v} is 10+{acc}-{v}.", "alt")
        new = (acc + v) % 10 if op == "+" else (acc - v) % 10
        line = f"{acc}{op}{v}={new}."
        say(line, "arith")
        if new == 0:
            say(f"Wait, {line[:-1]} is right.", "wait")
            say("", "blank")
        acc = new
    say("</think>", "end")
    say(f"\\boxed{{{acc}}}", "answer")
    return prompt, "\n".join(lines) + "\n", acc, kinds


def generate(split, n, seed, facts=(8, 24), terms=(20, 60)):
    """n problems of `split`, deterministic in (split, n, seed, facts, terms)."""
    rng = random.Random(f"{split}:{seed}")
    out = []
    while len(out) < n:
        nf = rng.randint(*facts)
        nt = rng.randint(*terms)
        p, t, ans, kinds = make_problem(rng, nf, nt)
        if split_of(p) != split:
            continue
        out.append({"prompt": p, "trace": t, "answer": ans, "kinds": kinds})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=["train", "val", "test"], required=True)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--facts", type=int, nargs=2, default=[8, 24])
    ap.add_argument("--terms", type=int, nargs=2, default=[20, 60])
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    probs = generate(a.split, a.n, a.seed, tuple(a.facts), tuple(a.terms))
    text = "".join(json.dumps(p) + "\n" for p in probs)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
