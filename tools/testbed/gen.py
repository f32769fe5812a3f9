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

Format 4 (--fmt 4, testbed v2; format 3 stays the default and unchanged): the same prompts, and a trace
with a blank line after every line (so ".\\n\\n" precedes every step), optional lines chosen by a seeded
coin (p = 0.5) where their visible condition holds, checkpoints, and, under simulated eviction
(train.py), a recovery routine:

  bop kov7.
  <blank line>
  0+7=7, 29 left.
  <blank line>
  Wait, kov was used before.           <- optional (a revisit); so are "Alternatively, ..." and "Wait, a+b=0 is right."
  <blank line>
  ...
  Wait, the last check was at zor, sum 6.   <- restates the previous checkpoint once (from the second one on)
  <blank line>
  Check: at bak, sum 4, 20 left.       <- checkpoint before the look-up of every 5th step
  <blank line>
  bak lost.                            <- (only where train.py hid bak's fact) the key matched no fact
  <blank line>
  Check: at bak, sum 4, 20 left.       <- the last checkpoint restated, then the re-walk from it
  <blank line>
  bak zor2.                            <- the look-up again: a copy if the fact is visible, else a best guess
  <blank line>
  4+2=6, 19 left.

  /usr/bin/python3 tools/testbed/gen.py --fmt 4 --split test --n 500 --seed 0 --format eval \\
      --out data/datasets/testbed2_test.jsonl
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
    """Returns (prompt, trace, answer, kinds); kinds[i] is the kind of trace line i (format 3)."""
    prompt, start, nxt, fact = walk(rng, n_facts, n_steps)
    lines, kinds = [], []

    def say(s, kind):
        lines.append(s)
        kinds.append(kind)

    acc, cur, seen = 0, start, set()
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


# ---- format 4 (testbed v2) ---------------------------------------------------------------------------

CHECK_EVERY = 5  # a checkpoint line before the look-up of every 5th step (steps 5, 10, ...)
TERMS4 = (10, 32)  # format 4's default walk lengths (its lines are longer than format 3's)


def walk(rng, n_facts, n_steps):
    """A problem's prompt and its walk (the draws of formats 3 and 4): returns (prompt, start, nxt, fact).

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
    return prompt, cyc[0], nxt, fact


def trace4(rng, start, nxt, fact, n_steps, lost=None, lost_style="key"):
    """Format 4's trace of a walk: (lines, kinds, answer). Every line is followed by a blank line.

    Optional lines (present when `rng` says so, p = 0.5, wherever their visible condition holds; the
    answer never needs them): "Wait, NAME was used before." (a revisit), "Alternatively, a+b is s-10."
    (a sum of 13 or more), "Wait, a+b=0 is right." (a result of 0). Always present: a checkpoint
    "Check: at NAME, sum S, L left." before the look-up of every CHECK_EVERY-th step (it restates the
    last arithmetic line's sum and count and the name just looked up) and, from the second checkpoint on,
    a restatement of the previous one ("Wait, the last check was at NAME, sum S.").

    lost = i (or a set of steps): the look-up of step i finds no fact (simulated eviction: train.py hides the prompt's fact
    line and the trace's earlier copies of it). The trace then holds the recovery routine in place of
    that look-up: "NAME lost." (detection: the token after the key, where a copy would be, says that
    no fact matched; lost_style="wait" writes "Wait, NAME is lost." instead, detection at the line
    start, the variant of the first v2 run), the last checkpoint restated ("Check: at C, sum S,
    L left."; before the first checkpoint, the start: "Check: at START, sum 0, N left."), the re-walk (the
    look-up lines of the steps since that checkpoint, copied again from the trace), then the look-up line
    once more: a copy if the fact is visible, else a best guess, and the walk goes on. One recovery per look-up: bounded."""
    lost = {lost} if isinstance(lost, int) else set(lost or ())
    lines, kinds = [], []

    def say(s, kind):
        lines.append(s)
        kinds.append(kind)
        lines.append("")
        kinds.append("blank")

    acc, cur, seen = 0, start, set()
    visits = []  # the names of steps 0..i-1
    last_check = (start, 0, n_steps)  # (name, sum, left) of the last checkpoint (the task line at first)
    check_step = 0
    prev_check = None
    for i in range(n_steps):
        left = n_steps - 1 - i
        v = fact[cur]
        if i > 0 and i % CHECK_EVERY == 0:
            if prev_check is not None:
                say(f"Wait, the last check was at {prev_check[0]}, sum {prev_check[1]}.", "restate")
            last_check = (cur, acc, n_steps - i)
            check_step = i
            prev_check = last_check
            say(f"Check: at {cur}, sum {acc}, {n_steps - i} left.", "check")
        if i in lost:
            say(f"{cur} lost." if lost_style == "key" else f"Wait, {cur} is lost.", "lost")
            say(f"Check: at {last_check[0]}, sum {last_check[1]}, {last_check[2]} left.", "recheck")
            for k in visits[check_step:i]:
                say(fact_line(k, nxt[k], fact[k]), "rewalk")
            say(fact_line(cur, nxt[cur], v), "guess")
        else:
            if cur in seen and rng.random() < 0.5:
                say(f"Wait, {cur} was used before.", "wait")
            say(fact_line(cur, nxt[cur], v), "lookup")
        seen.add(cur)
        visits.append(cur)
        if acc + v >= ALT_FROM and rng.random() < 0.5:
            say(f"Alternatively, {acc}+{v} is {acc + v}-10.", "alt")
        new = (acc + v) % 10
        say(f"{acc}+{v}={new}, {left} left.", "arith")
        if new == 0 and rng.random() < 0.5:
            say(f"Wait, {acc}+{v}=0 is right.", "wait0")
        acc, cur = new, nxt[cur]
    lines.append("</think>")
    kinds.append("end")
    lines.append(f"\\boxed{{{acc}}}")
    kinds.append("answer")
    return lines, kinds, acc


def make_problem4(rng, n_facts, n_steps, lost=None, lost_style="key"):
    """Format 4: (prompt, trace, answer, kinds), the prompt exactly as format 3's."""
    prompt, start, nxt, fact = walk(rng, n_facts, n_steps)
    lines, kinds, acc = trace4(rng, start, nxt, fact, n_steps, lost, lost_style)
    return prompt, "\n".join(lines) + "\n", acc, kinds


def generate(split, n, seed, facts=(8, 24), terms=(12, 40), fmt=3):
    """n problems of `split`, deterministic in (split, n, seed, facts, terms, fmt); terms = walk steps."""
    rng = random.Random(f"{split}:{seed}" if fmt == 3 else f"fmt{fmt}:{split}:{seed}")
    out = []
    while len(out) < n:
        nf = rng.randint(*facts)
        nt = rng.randint(*terms)
        p, t, ans, kinds = (make_problem if fmt == 3 else make_problem4)(rng, nf, nt)
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
    ap.add_argument("--terms", type=int, nargs=2, default=None,
                    help="walk steps (default 12 40 in format 3, 10 32 in format 4)")
    ap.add_argument("--fmt", type=int, choices=[3, 4], default=3,
                    help="3: the v1 testbed's format (the default, unchanged); 4: testbed v2's")
    ap.add_argument("--out", default="")
    ap.add_argument("--format", choices=["full", "eval"], default="full",
                    help="full: prompt, trace, answer, kinds; eval: id, prompt, answer (a `skipkv eval` dataset)")
    a = ap.parse_args()
    terms = tuple(a.terms) if a.terms else ((12, 40) if a.fmt == 3 else TERMS4)
    probs = generate(a.split, a.n, a.seed, tuple(a.facts), terms, a.fmt)
    tag = "testbed" if a.fmt == 3 else "testbed2"
    if a.format == "eval":
        probs = [{"id": f"{tag}-{a.split}-{i}", "prompt": p["prompt"], "answer": str(p["answer"])}
                 for i, p in enumerate(probs)]
    text = "".join(json.dumps(p) + "\n" for p in probs)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
