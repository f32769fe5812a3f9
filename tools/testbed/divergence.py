"""Where a testbed generation first goes wrong, per method and budget (issue 13's "analyse why"): reads
`skipkv demo` / `skipkv eval` rows on the test split, regenerates each problem's reference trace with
gen.py, and compares the execution lines (facts copied from the prompt, running sums, the end and the
answer; the Wait / Alternatively sentences and blank lines left out, since they do not change the
answer and the model's choice of them is not exact). The first execution line that differs is
classified by its reference kind: lookup (a fact no longer retrieved correctly: the eviction the testbed
is built to measure), arith (the running sum), end / answer. Also: the share of rows whose non-execution
sentences differ from the reference's, the mean slots evicted and, for skipkv, the mean penalised
(sentence-redundant) slots among them.

  /usr/bin/python3 tools/testbed/divergence.py skipkv-demo.jsonl [--split test --n 500 --seed 0]
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402


NONEXEC = ("Wait", "Alternatively")


def first_divergence(ref_trace, kinds, output):
    """(kind of the first reference execution line the output does not reproduce or "", whether the
    non-execution sentences differ)."""
    ref = [(l, k) for l, k in zip(ref_trace.split("\n"), kinds) if k not in ("wait", "alt", "blank")]
    out_lines = output.split("\n")
    out = [l for l in out_lines if l and not l.startswith(NONEXEC)]
    ref_nonexec = [l for l, k in zip(ref_trace.split("\n"), kinds) if k in ("wait", "alt")]
    nonexec_differ = ref_nonexec != [l for l in out_lines if l.startswith(NONEXEC)]
    for i, (line, kind) in enumerate(ref):
        if i >= len(out) or out[i] != line:
            return kind, nonexec_differ
    return "", nonexec_differ


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("--split", default="test")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    probs = gen.generate(a.split, a.n, a.seed)
    groups = collections.OrderedDict()
    with open(a.rows) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            i = r["line"] - 1
            if not 0 <= i < len(probs):
                sys.exit(f"{a.rows}:{line_no}: line {r['line']} is outside the {a.split} split of {a.n}")
            p = probs[i]
            if str(p["answer"]) != str(r["reference"]):
                sys.exit(f"{a.rows}:{line_no}: reference {r['reference']} != gen.py's answer {p['answer']} "
                         f"(another split, size or seed?)")
            g = groups.setdefault((r["method"], r["budget"]), {"n": 0, "ok": 0, "div": collections.Counter(),
                                                               "nonexec": 0, "evicted": 0, "penalized": 0})
            kind, nonexec_differ = first_divergence(p["trace"], p["kinds"], r["output"])
            g["n"] += 1
            g["ok"] += bool(r["correct"])
            g["div"][kind or "none"] += 1
            g["nonexec"] += nonexec_differ
            g["evicted"] += r["kv"].get("slots_evicted", 0)
            g["penalized"] += r["kv"].get("penalized_evicted", 0)
    kinds = ["none", "lookup", "arith", "end", "answer"]
    print("| method | budget | accuracy | " + " | ".join(f"first wrong: {k}" for k in kinds)
          + " | Wait/Alt. lines differ | slots evicted | of them penalised |")
    print("|---|---:|---:|" + "---:|" * len(kinds) + "---:|---:|---:|")
    for (m, b), g in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        n = g["n"]
        cells = " | ".join(f"{100 * g['div'][k] / n:.0f}%" for k in kinds)
        print(f"| {m} | {b if b else 'full'} | {100 * g['ok'] / n:.1f}% | {cells} | {100 * g['nonexec'] / n:.0f}% | "
              f"{g['evicted'] / n:.0f} | "
              f"{g['penalized'] / n:.0f} |")


if __name__ == "__main__":
    main()
