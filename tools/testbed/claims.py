#!/usr/bin/env python3
"""The claims table of BENCHMARKS.md ("The paper's three claims on the testbed", issue 39).

Reads result rows (JSONL of `skipkv demo` / `skipkv eval`) of one ragged and one padded run
and prints, per (method, budget): accuracy ragged / padded, mean generated tokens ragged /
padded and their change against FullKV's, and the mean number of Wait / Alternatively lines
inside the thought (what SkipKV's steering is meant to cut). Rows of several files are merged
(later files add methods; a (method, budget, problem) seen twice is an error).

--recovery adds testbed v2's columns (ragged): the `NAME lost.` lines per trace (the model noticed
a fact it needs is gone and starts its recovery routine), the `Check:` lines per trace (stated
checkpoints and their restatements) and the share of traces cut at the length limit (finish
"length": the model looped instead of ending).

    python3 tools/testbed/claims.py --ragged a.jsonl [b.jsonl ...] --padded c.jsonl [d.jsonl ...] [--recovery]

Standard library only.
"""
import argparse
import json
import sys
from collections import defaultdict


def load(paths):
    rows = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                r = json.loads(line)
                if "method" not in r or "correct" not in r:
                    continue
                key = (r["method"], r.get("budget", 0), r["problem"], r.get("sample", 0))
                if key in rows:
                    sys.exit(f"{path}:{n}: row {key} seen twice")
                rows[key] = r
    return rows


def thought_lines(output):
    think = output.split("</think>")[0]
    return [l for l in think.split("\n") if l.strip()]


def summarize(rows):
    groups = defaultdict(list)
    for (method, budget, _, _), r in rows.items():
        groups[(method, budget)].append(r)
    out = {}
    for key, rs in groups.items():
        n = len(rs)
        lines = [thought_lines(r.get("output", "")) for r in rs]
        nonexec = [sum(1 for l in ls if l.startswith("Wait") or l.startswith("Alternatively")) for ls in lines]
        lost = [sum(1 for l in ls if l.strip().endswith(" lost.")) for ls in lines]
        checks = [sum(1 for l in ls if l.startswith("Check:")) for ls in lines]
        out[key] = {
            "n": n,
            "acc": 100.0 * sum(1 for r in rs if r["correct"]) / n,
            "tokens": sum(r["output_tokens"] for r in rs) / n,
            "nonexec": sum(nonexec) / n,
            "lost": sum(lost) / n,
            "checks": sum(checks) / n,
            "cut": 100.0 * sum(1 for r in rs if r.get("finish") == "length") / n,
        }
    return out


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ragged", nargs="+", required=True)
    ap.add_argument("--padded", nargs="+", required=True)
    ap.add_argument("--order", default="", help="comma-separated method order (default: as found)")
    ap.add_argument("--recovery", action="store_true",
                    help="add testbed v2's columns: lost / Check: lines per trace, %% cut at the length limit")
    a = ap.parse_args()
    rag, pad = summarize(load(a.ragged)), summarize(load(a.padded))
    full = rag.get(("fullkv", 0))
    keys = sorted(set(rag) | set(pad), key=lambda k: (k[1], k[0]))
    if a.order:
        order = {m: i for i, m in enumerate(a.order.split(","))}
        keys = sorted(keys, key=lambda k: (k[1], order.get(k[0], len(order)), k[0]))
    extra = " `lost` lines | `Check:` lines | cut at limit |" if a.recovery else ""
    print("| method | B | ragged acc % | padded acc % | ragged tokens | padded tokens | "
          "tokens vs FullKV (ragged) | Wait/Alt. lines (ragged) |" + extra)
    print("|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if a.recovery else ""))
    for k in keys:
        r, p = rag.get(k), pad.get(k)
        rel = None
        if r and full:
            rel = 100.0 * (r["tokens"] / full["tokens"] - 1)
        print(f"| {k[0]} | {k[1] or 'full'} | {fmt(r and r['acc'], '.1f')} | {fmt(p and p['acc'], '.1f')} | "
              f"{fmt(r and r['tokens'], '.1f')} | {fmt(p and p['tokens'], '.1f')} | "
              f"{'—' if rel is None else format(rel, '+.1f') + ' %'} | {fmt(r and r['nonexec'], '.1f')} |"
              + (f" {fmt(r and r['lost'], '.2f')} | {fmt(r and r['checks'], '.1f')} | "
                 f"{'—' if not r else format(r['cut'], '.1f') + ' %'} |" if a.recovery else ""))
    ns = {v["n"] for v in list(rag.values()) + list(pad.values())}
    print(f"\nrows per (method, budget): {sorted(ns)}")


if __name__ == "__main__":
    main()
