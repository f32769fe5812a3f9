#!/usr/bin/env python3
"""Turns bench_amx's console output into a Markdown table of AMX on against off.

bench_amx (bench/bench_amx.cpp) times each interleaved product twice, with
`amx:0` (the AVX-512 VNNI kernel) and `amx:1` (the AMX tile kernel), per
shape and thread count, and reports `GMAC/s=<value>/s`. This pairs the two
rows of each (benchmark, shape, threads) and prints

  | benchmark | shape | threads | AMX off GMAC/s | AMX on GMAC/s | on / off |

(shape: rows x inputs from the rows' labels, else bench_amx's shape index)

with the reason instead of a figure where a row is an error (e.g. "AMX not
usable: ..."). The device protocol (scripts/intel_protocol.sh) runs it on
its bench_amx.txt, so the first thing an AMX run answers, whether the tiles
win and where, is one table.

Usage: scripts/bench_amx_table.py BENCH_AMX_OUTPUT
"""
import re
import sys

ROW = re.compile(r"^(BM_\w+)/amx:([01])/shape:(\d+)/threads:(\d+)/\S*\s+(.*)$")
RATE = re.compile(r"GMAC/s=([0-9.eE+-]+)([kMG]?)/s")
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
SHAPE = re.compile(r"\b(\d+)x(\d+)\s*$")


def parse(lines):
    """{(benchmark, shape, threads): {amx: GMAC/s float, or the error text}} in input order;
    shape is "rows × in" where a row's label says it, else the index."""
    table = {}
    names = {}  # (benchmark, shape index) -> "rows × in"
    for line in lines:
        m = ROW.match(line.strip())
        if not m:
            continue
        name, amx, shape, threads, rest = m.groups()
        label = SHAPE.search(rest)
        if label:
            names[(name, shape)] = f"{label.group(1)} × {label.group(2)}"
        cell = table.setdefault((name, shape, int(threads)), {})
        rate = RATE.search(rest)
        if "ERROR OCCURRED" in rest:
            err = re.search(r"ERROR OCCURRED: '(.*)'", rest)
            cell[int(amx)] = err.group(1) if err else rest
        elif rate:
            cell[int(amx)] = float(rate.group(1)) * SCALE[rate.group(2)]
    return {(n, names.get((n, sh), sh), t): cell for (n, sh, t), cell in table.items()}


def fmt(v):
    return "—" if v is None else (f"{v:.1f}" if isinstance(v, float) else v)


def render(table):
    out = ["| benchmark | shape | threads | AMX off GMAC/s | AMX on GMAC/s | on / off |",
           "|---|---:|---:|---:|---:|---:|"]
    for (name, shape, threads), cell in table.items():
        off, on = cell.get(0), cell.get(1)
        ratio = f"{on / off:.2f}×" if isinstance(on, float) and isinstance(off, float) and off > 0 else "—"
        out.append(f"| {name} | {shape} | {threads} | {fmt(off)} | {fmt(on)} | {ratio} |")
    return "\n".join(out)


def main(argv):
    if len(argv) != 2:
        print("usage: bench_amx_table.py BENCH_AMX_OUTPUT", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8", errors="replace") as f:
            table = parse(f)
    except OSError as e:
        print(f"bench_amx_table.py: {argv[1]}: {e.strerror}", file=sys.stderr)
        return 1
    if not table:
        print(f"bench_amx_table.py: {argv[1]}: no bench_amx rows (BM_<name>/amx:<0|1>/shape:<n>/threads:<n>)",
              file=sys.stderr)
        return 1
    print(render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
