"""Checks gen.py's format 4 (testbed v2) invariants, and classifies the sentences of model traces.

On generated problems (both without and with simulated eviction, train.py's lost_steps):
- every trace line inside <think> ... </think> is followed by a blank line (so ".\\n\\n" precedes every step);
- each optional line (revisit Wait, Alternatively, zero Wait) is present in 40-60 % of the places where
  its visible condition holds;
- the answer is computable without any non-execution line: a reader that keeps only the look-up lines
  and the arithmetic lines checks every look-up against the prompt's facts (or, for a guess after a
  loss, against the walk), every sum against the line before, and gets the answer from the last sum;
- the non-execution fraction of the trace sentences is at least 15 %;
- every recovery is bounded: one "NAME lost." per lost step, followed by the checkpoint
  restated, the re-walk (copies of lines already in the trace) and the look-up of NAME;
- format 3 (the default) is unchanged: gen.generate(fmt=3) matches data/datasets/testbed_test.jsonl.

Sentence classes (a sentence = a non-blank line between <think> and </think>): execution = the look-up
line of a step (a copy, or the guess after a failed recovery) and the arithmetic line; non-execution =
"Wait, NAME was used before.", "Wait, a+b=0 is right.", "Alternatively, a+b is s-10.", "Check: ...",
"Wait, the last check was ...", and the recovery's "NAME lost." (or "Wait, NAME is lost."), restated checkpoint and re-walk
lines: the answer needs none of them (checked above).

  /usr/bin/python3 tools/testbed/check_format4.py                      # the generator's invariants
  /usr/bin/python3 tools/testbed/check_format4.py --rows ROWS.jsonl    # classify `skipkv eval` rows' traces
"""
import argparse
import collections
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

EXEC = {"lookup", "guess", "arith"}
NON_EXEC = {"wait", "wait0", "alt", "check", "restate", "lost", "recheck", "rewalk"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

LOOKUP = re.compile(r"^([a-z]{3}) ([a-z]{3})(\d)\.$")
ARITH = re.compile(r"^(\d)\+(\d)=(\d), (\d+) left\.$")


def classify(think_lines):
    """Kinds of the non-blank lines of a trace (model output or generator), by their text."""
    kinds, lost_key = [], None
    for i, ln in enumerate(think_lines):
        m = LOOKUP.match(ln)
        if m:
            if lost_key is not None and m.group(1) != lost_key:
                kinds.append("rewalk")
            else:
                kinds.append("guess" if lost_key is not None else "lookup")
                lost_key = None
        elif ARITH.match(ln):
            kinds.append("arith")
        elif re.match(r"^Wait, [a-z]{3} is lost\.$", ln) or re.match(r"^[a-z]{3} lost\.$", ln):
            kinds.append("lost")
            lost_key = ln.split()[1] if ln.startswith("Wait") else ln.split()[0]
        elif ln.startswith("Wait, the last check was at "):
            kinds.append("restate")
        elif ln.startswith("Check: at "):
            kinds.append("recheck" if kinds and kinds[-1] == "lost" else "check")
        elif re.match(r"^Wait, [a-z]{3} was used before\.$", ln):
            kinds.append("wait")
        elif re.match(r"^Wait, \d\+\d=0 is right\.$", ln):
            kinds.append("wait0")
        elif ln.startswith("Alternatively, "):
            kinds.append("alt")
        else:
            kinds.append("other")
    return kinds


def read_answer(prompt, lines, kinds, lost_keys):
    """The answer from execution lines only; asserts every look-up and sum on the way."""
    facts = {}
    for ln in prompt.split("\n"):
        m = LOOKUP.match(ln)
        if m:
            facts[m.group(1)] = (m.group(2), int(m.group(3)))
    start = re.search(r"start at ([a-z]{3}), (\d+) steps", prompt)
    cur, n, acc, digit, steps = start.group(1), int(start.group(2)), 0, None, 0
    for ln, k in zip(lines, kinds):
        if k not in EXEC:
            continue
        if k in ("lookup", "guess"):
            m = LOOKUP.match(ln)
            assert m and m.group(1) == cur, (ln, cur)
            assert (m.group(2), int(m.group(3))) == facts[cur], (ln, facts[cur])
            assert k == "lookup" or cur in lost_keys, ln
            digit, cur = int(m.group(3)), m.group(2)
        else:
            m = ARITH.match(ln)
            assert m and int(m.group(1)) == acc and int(m.group(2)) == digit, (ln, acc, digit)
            acc = (acc + digit) % 10
            assert int(m.group(3)) == acc
            steps += 1
            assert int(m.group(4)) == n - steps, ln
    assert steps == n
    return acc


def check_generator(n_problems, seed):
    from train import lost_steps  # noqa: E402  (train.py imports torch; only the generator check needs it)
    rng = random.Random(f"check-format4:{seed}")
    opt_cond = collections.Counter()
    opt_have = collections.Counter()
    count = collections.Counter()
    for j in range(n_problems):
        nf, nt = rng.randint(8, 24), rng.randint(*gen.TERMS4)
        prompt, start, nxt, fact = gen.walk(rng, nf, nt)
        lost = lost_steps(rng, start, nxt, nt, 0.5)
        lines, kinds, ans = gen.trace4(rng, start, nxt, fact, nt, lost)
        text = "\n".join(lines) + "\n"
        body = text[:text.index("</think>")]
        # every line followed by a blank line
        parts = body.split("\n")
        assert parts[-1] == "" and len(parts) % 2 == 1, body[-40:]
        for a, b in zip(parts[0:-1:2], parts[1:-1:2]):
            assert a and b == "", (a, b)
        assert body.count(".\n\n") == len(parts) // 2
        think = [ln for ln in parts if ln]
        gk = [k for k in kinds if k not in ("blank", "end", "answer")]
        assert classify(think) == gk, list(zip(think, classify(think), gk))
        assert "other" not in gk
        assert read_answer(prompt, think, gk, {lines[i].split()[0] for i, k in enumerate(kinds) if k == "lost"}) == ans
        assert lines[-1] == f"\\boxed{{{ans}}}" and lines[-2] == "</think>"
        assert gk.count("lost") == len(lost) == gk.count("guess") == gk.count("recheck")
        count.update(gk)
        # the optional lines: where their condition held, how often present
        steps = []  # per step: (revisit, alt condition, zero condition)
        acc, cur, seen = 0, start, set()
        for s in range(nt):
            v = fact[cur]
            steps.append((cur in seen and s not in lost, acc + v >= gen.ALT_FROM, (acc + v) % 10 == 0))
            seen.add(cur)
            acc, cur = (acc + v) % 10, nxt[cur]
        opt_cond["wait"] += sum(r for r, _, _ in steps)
        opt_cond["alt"] += sum(a for _, a, _ in steps)
        opt_cond["wait0"] += sum(z for _, _, z in steps)
        for k in ("wait", "alt", "wait0"):
            opt_have[k] += gk.count(k)
    total = sum(count.values())
    non_exec = sum(v for k, v in count.items() if k in NON_EXEC)
    print(f"{n_problems} problems (train.py's eviction mix), {total} sentences, non-execution "
          f"{non_exec / total:.1%}: " + ", ".join(f"{k} {v}" for k, v in sorted(count.items())))
    for k in ("wait", "alt", "wait0"):
        f = opt_have[k] / opt_cond[k]
        print(f"optional '{k}': present in {opt_have[k]} of {opt_cond[k]} places ({f:.1%})")
        assert 0.4 <= f <= 0.6, k
    assert non_exec / total >= 0.15
    # format 3 is unchanged
    ref = os.path.join(ROOT, "data", "datasets", "testbed_test.jsonl")
    if os.path.exists(ref):
        rows = [json.loads(x) for x in open(ref)]
        mine = gen.generate("test", len(rows), 0)
        assert [r["prompt"] for r in rows] == [p["prompt"] for p in mine]
        assert [r["answer"] for r in rows] == [str(p["answer"]) for p in mine]
        print(f"format 3 unchanged: {len(rows)} rows of {os.path.relpath(ref, ROOT)} regenerate")
    print("format 4 invariants hold")


def classify_rows(path, method, budget):
    """Sentence classes of the traces in `skipkv eval` rows (the output text up to </think>; the prompt
    ends with "<think>\\n"); summary rows (no output) are skipped."""
    count = collections.Counter()
    n = 0
    for line in open(path):
        r = json.loads(line)
        if "output" not in r or (method and r.get("method") != method) or (budget is not None
                                                                            and r.get("budget") != budget):
            continue
        text = r["output"]
        body = text.split("</think>")[0]
        think = [ln for ln in body.split("\n") if ln.strip()]
        count.update(classify(think))
        n += 1
    total = sum(count.values())
    non_exec = sum(v for k, v in count.items() if k in NON_EXEC)
    print(f"{path}: {n} traces, {total} sentences, non-execution {non_exec / max(1, total):.1%} "
          f"(other {count['other']}): " + ", ".join(f"{k} {v}" for k, v in sorted(count.items())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="generated problems to check")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rows", default="", help="a `skipkv eval` JSONL: classify its traces instead")
    ap.add_argument("--method", default="", help="with --rows: only rows of this method")
    ap.add_argument("--budget", type=int, default=None, help="with --rows: only rows of this budget")
    a = ap.parse_args()
    if a.rows:
        classify_rows(a.rows, a.method, a.budget)
    else:
        check_generator(a.n, a.seed)


if __name__ == "__main__":
    main()
