"""Deterministic, seeded generator of the testbed's reasoning problems (issue 13).

A problem is a walk over linked facts. Each fact names the next fact and a digit to add; the task gives
the start and the number of steps. The trace solves it one sentence per line, R1 style, and ends with a
\\boxed{} answer (format 3):

  Facts:
  bak dor7.
  dor fim9.
  fim bak4.
  kel kel5.                            <- a distractor (not on the walk)
  Task: start at bak, 5 steps.
  <think>
  bak dor7.                            <- look-up: the fact copied from the prompt in exactly its format
  0+7=7, 4 left.                       <- running sum mod 10, and the steps still to go
  dor fim9.
  Alternatively, 7+9 is 16-10.         <- transition, triggered by a sum of 13 or more
  7+9=6, 3 left.
  fim bak4.
  6+4=0, 2 left.
  Wait, 6+4=0 is right.                <- re-verification, triggered by a result of 0
  <blank line>                         <- a paragraph break follows every "Wait" line ("\\n\\n" in the text)
  Wait, bak was used before.           <- re-verification, triggered by a fact the walk already visited
  <blank line>
  bak dor7.
  0+7=7, 1 left.
  dor fim9.
  Alternatively, 7+9 is 16-10.
  7+9=6, 0 left.
  </think>
  \\boxed{6}

Why this format: every token that a look-up copies is one induction step from a token that occurs once
among the facts. The key (the name at a line start, "bak", a token of its own) occurs once in the prompt,
and the token after it is the next name (" dor"); each name is the successor of exactly one fact, so the
token after " dor" in the facts is that fact's digit. A copy is then the plain match-and-copy of
associative recall, applied twice. Format 2 ("bak: +3 go dor.") put a colon, a sign and " go" between
the key and what had to be copied, so each copied token needed a match on two to four tokens back; its
run's look-up stayed at the base rate for 1,050 steps, and probes of its pure look-up task from scratch
did not form it in 875 steps of 32 sequences (tools/testbed/README.md).

A result of 0 adds "Wait, a+b=0 is right." (re-verification of the line above). Every look-up needs a
fact from the prompt (or from the trace's earlier visit), found by the name just written: a plain copy
after a match, the retrieval that KV eviction threatens. Every other sentence depends only on the last
few lines, and every sentence kind is triggered by a condition the model can see.

Names come from a fixed pool of 40 three-letter words, so that the tokenizer learns each name as one
token in both of its roles: the key at a line start ("bak", only where the fact is stated or copied) and
a mention (" bak", everywhere else). Splits: a problem belongs to the split given by a hash of its prompt
text (test 0-1, val 2-3, train 4-99 of 100), so train / val / test never share a prompt, whatever seeds
produced them.

  /usr/bin/python3 tools/testbed/gen.py --split test --n 500 --seed 0 --format eval \\
      --out data/datasets/testbed_test.jsonl
"""
import argparse
import hashlib
import json
import random

NAME_POOL = ("bak dor fim gul hes jav kel lom mip nur pav rog sut tib vex wol yad zen bop cug dak "
             "fep gom hix jur kov lib mek nas pek rux sol tev vim wex yul zor bem cid tan").split()
assert len(NAME_POOL) == len(set(NAME_POOL)) == 40


def names(rng, n):
    """n distinct names from the pool, in random order."""
    return rng.sample(NAME_POOL, n)


def split_of(prompt):
    h = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "little") % 100
    return "test" if h < 2 else "val" if h < 4 else "train"


ALT_FROM = 13  # "Alternatively, a+b is s-10." when the sum a+b is at least this


def fact_line(k, nxt, v):
    """One fact: the key, the next fact's name and the digit to add, e.g. "bak dor3."."""
    return f"{k} {nxt}{v}."


def make_problem(rng, n_facts, n_steps):
    """Returns (prompt, trace, answer, kinds); kinds[i] is the kind of trace line i.

    The walk's cycle holds between half and all of the n_facts names; the others link among themselves
    (distractors). Facts are listed in random order."""
    ns = names(rng, n_facts)
    c = rng.randint((n_facts + 1) // 2, n_facts)
    cyc, rest = ns[:c], ns[c:]
    nxt = {cyc[i]: cyc[(i + 1) % c] for i in range(c)}
    for i, k in enumerate(rest):
        nxt[k] = rest[(i + 1) % len(rest)]
    fact = {k: rng.randint(1, 9) for k in ns}
    order = ns[:]
    rng.shuffle(order)
    prompt = ("Facts:\n" + "".join(fact_line(k, nxt[k], fact[k]) + "\n" for k in order)
              + f"Task: start at {cyc[0]}, {n_steps} steps.\n<think>\n")
    lines, kinds = [], []

    def say(s, kind):
        lines.append(s)
        kinds.append(kind)

    acc, cur, seen = 0, cyc[0], set()
    for left in range(n_steps - 1, -1, -1):
        if cur in seen:
            say(f"Wait, {cur} was used before.", "wait")
            say("", "blank")
        seen.add(cur)
        v = fact[cur]
        say(fact_line(cur, nxt[cur], v), "lookup")
        if acc + v >= ALT_FROM:
            say(f"Alternatively, {acc}+{v} is {acc + v}-10.", "alt")
        new = (acc + v) % 10
        say(f"{acc}+{v}={new}, {left} left.", "arith")
        if new == 0:
            say(f"Wait, {acc}+{v}=0 is right.", "wait")
            say("", "blank")
        acc, cur = new, nxt[cur]
    say("</think>", "end")
    say(f"\\boxed{{{acc}}}", "answer")
    return prompt, "\n".join(lines) + "\n", acc, kinds


def generate(split, n, seed, facts=(8, 24), terms=(12, 40)):
    """n problems of `split`, deterministic in (split, n, seed, facts, terms); terms = walk steps."""
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
    ap.add_argument("--terms", type=int, nargs=2, default=[12, 40], help="walk steps")
    ap.add_argument("--out", default="")
    ap.add_argument("--format", choices=["full", "eval"], default="full",
                    help="full: prompt, trace, answer, kinds; eval: id, prompt, answer (a `skipkv eval` dataset)")
    a = ap.parse_args()
    probs = generate(a.split, a.n, a.seed, tuple(a.facts), tuple(a.terms))
    if a.format == "eval":
        probs = [{"id": f"testbed-{a.split}-{i}", "prompt": p["prompt"], "answer": str(p["answer"])}
                 for i, p in enumerate(probs)]
    text = "".join(json.dumps(p) + "\n" for p in probs)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
