#!/usr/bin/env python3
"""Turns bench_amx's console output into Markdown tables: AMX on against off, and decode per prefetch distance.

bench_amx (bench/bench_amx.cpp) times each interleaved product twice, with
`amx:0` (the AVX-512 VNNI kernel) and `amx:1` (the AMX tile kernel), per
shape and thread count, and reports `GMAC/s=<value>/s`. This pairs the two
rows of each (benchmark, shape, threads) and prints

  | benchmark | shape | threads | AMX off GMAC/s | AMX on GMAC/s | on / off |

(shape: rows x inputs from the rows' labels, else bench_amx's shape index)

with the reason instead of a figure where a row is an error (e.g. "AMX not
usable: ..."). Its decode rows (`BM_<type>Decode/prefetch:<bytes>/...`, GB/s
of weights read, the one-token tiles prefetching that many bytes ahead, -1
the defaults) make a second table, one column per distance, and its decode
stream rows (`BM_<type>DecodeStreams/streams:<n>/...`, the one-token kernels
reading n weight streams side by side, -1 the defaults) a third, one column
per stream count;

  --pick FILE  writes the SKIPKV_DECODE_PREFETCH value the rows call for to
               FILE (an empty file when the defaults stand). The rule, fixed
               before any run on the machines it is for: per weight type, the
               distance whose GB/s over the default's has the highest
               geometric mean across all of that type's shapes and thread
               counts (a distance with an error or no figure on one of them
               is not a candidate, nor one that the rows' labels show
               rounds to the default's number of blocks; rows with more
               threads than Google Benchmark's "Run on (N X ...)" CPUs are
               oversubscribed and left out), where that mean is at least
               1.03; otherwise the type keeps its default and is left out.
  --pick-streams FILE  the same rule over the stream rows with the
               prefetch at its defaults, for SKIPKV_DECODE_STREAMS (a count
               equal to the default's, as the rows' labels show it, is not a
               candidate; the rows with the prefetch off, `/prefetch:0`, are
               columns "N streams, no prefetch" for reading, not candidates).

The device protocol (scripts/intel_protocol.sh) runs it on its
bench_amx.txt, so the first things a run answers, whether the tiles win and
where and whether the prefetch distances suit the CPU, are two tables; its
decode step then times skipkv end to end with the picked values beside the
defaults.

Usage: scripts/bench_amx_table.py BENCH_AMX_OUTPUT [--pick FILE] [--pick-streams FILE]
"""
import math
import re
import sys

ROW = re.compile(r"^(BM_\w+)/amx:([01])/shape:(\d+)/threads:(\d+)/\S*\s+(.*)$")
RATE = re.compile(r"GMAC/s=([0-9.eE+-]+)([kMG]?)/s")
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
SHAPE = re.compile(r"\b(\d+)x(\d+)\s*$")
DECODE_ROW = re.compile(r"^BM_(\w+)Decode/prefetch:(-?\d+)/shape:(\d+)/threads:(\d+)/\S*\s+(.*)$")
STREAMS_ROW = re.compile(r"^BM_(\w+)DecodeStreams/streams:(-?\d+)/shape:(\d+)/threads:(\d+)"
                         r"(?:/prefetch:(?P<prefetch>-?\d+))?/\S*\s+(.*)$")
# A stream row with the prefetch off (prefetch:0) is keyed NO_PREFETCH + streams.
NO_PREFETCH = 100
DECODE_RATE = re.compile(r"GB/s=([0-9.eE+-]+)([kMG]?)/s")
DECODE_SHAPE = re.compile(r"\b(\d+)x(\d+);")
# bench_amx's weight types -> SKIPKV_DECODE_PREFETCH's names ("Q6_K": the file layout's rows, which
# bench_amx timed before Q6_K was interleaved too; the same setting)
PICK_NAMES = {"Q8_0x16": "q8_0", "Q4_Kx16": "q4_k", "Q6_Kx16": "q6_k", "Q6_K": "q6_k"}
PICK_MIN_GAIN = 1.03


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


def prefetch_in_force(kind, rest):
    """Blocks ahead the label of a prefetch row shows for kind ("Q4_Kx16 4096 B (2 blocks)",
    "Q8_0x16 none"), or None."""
    ahead = re.search(re.escape(kind) + r" (?:(none)|\d+ B \((\d+) blocks?\))", rest)
    return None if not ahead else (0 if ahead.group(1) else int(ahead.group(2)))


def streams_in_force(kind, rest):
    """Streams the label of a stream row shows for kind ("...; Q8_0x16 2, Q4_Kx16 1"), or None."""
    m = re.search(re.escape(kind) + r" (\d+)\b(?! B)", rest)
    return int(m.group(1)) if m else None


def parse_decode(lines, blocks=None, row=DECODE_ROW, in_force=prefetch_in_force):
    """{(type, shape, threads): {setting: GB/s float, or the error text}} in input order, of the rows
    `row` matches (the prefetch rows, setting = bytes ahead; or STREAMS_ROW with streams_in_force,
    setting = streams). blocks, if given, gets {(type, setting): what the row's label shows in force}
    (blocks ahead, or streams)."""
    table = {}
    names = {}
    for line in lines:
        m = row.match(line.strip())
        if not m:
            continue
        kind, setting, shape, threads = m.groups()[:4]
        rest = m.groups()[-1]
        if m.groupdict().get("prefetch") == "0":
            setting = str(NO_PREFETCH + int(setting))
        shown = in_force(kind, rest)
        if blocks is not None and shown is not None:
            blocks[(kind, int(setting))] = shown
        label = DECODE_SHAPE.search(rest)
        if label:
            names[(kind, shape)] = f"{label.group(1)} × {label.group(2)}"
        cell = table.setdefault((kind, shape, int(threads)), {})
        rate = DECODE_RATE.search(rest)
        if "ERROR OCCURRED" in rest:
            err = re.search(r"ERROR OCCURRED: '(.*)'", rest)
            cell[int(setting)] = err.group(1) if err else rest
        elif rate:
            cell[int(setting)] = float(rate.group(1)) * SCALE[rate.group(2)]
    return {(k, names.get((k, sh), sh), t): cell for (k, sh, t), cell in table.items()}


def distance_name(d):
    return "default" if d < 0 else ("none" if d == 0 else f"{d} B")


def streams_name(n):
    if n >= NO_PREFETCH:
        return streams_name(n - NO_PREFETCH) + ", no prefetch"
    return "default" if n < 0 else (f"{n} stream" if n == 1 else f"{n} streams")


def render_decode(table, name=distance_name, what="decode"):
    distances = sorted({d for cell in table.values() for d in cell})
    head = " | ".join(name(d) + " GB/s" for d in distances)
    out = [f"| {what} | shape | threads | {head} | best / default |",
           "|---|---:|---:|" + "---:|" * len(distances) + "---:|"]
    for (kind, shape, threads), cell in table.items():
        base = cell.get(-1)
        best = max((d for d in distances if d >= 0 and isinstance(cell.get(d), float)),
                   key=lambda d: cell[d], default=None)
        ratio = (f"{cell[best] / base:.2f}× ({name(best)})"
                 if best is not None and isinstance(base, float) and base > 0 else "—")
        out.append(f"| {kind} | {shape} | {threads} | " + " | ".join(fmt(cell.get(d)) for d in distances) +
                   f" | {ratio} |")
    return "\n".join(out)


def cpus_of(lines):
    """The CPU count of Google Benchmark's context line "Run on (N X ... MHz CPU s)", or None."""
    for line in lines:
        m = re.match(r"^Run on \((\d+) X", line.strip())
        if m:
            return int(m.group(1))
    return None


def pick(table, blocks=None, cpus=None, setting_name=distance_name, max_setting=None):
    """(SKIPKV_DECODE_PREFETCH or SKIPKV_DECODE_STREAMS value or "", one line per type saying why) by
    the rule in the docstring; blocks: parse_decode's {(type, setting): what is in force}, to leave out
    settings equal to the default; cpus: the machine's CPU count, to leave out oversubscribed rows;
    setting_name: how a setting is written in the notes; max_setting: settings at or above it are shown
    in the table but no candidates (the stream rows without the prefetch, which the value cannot say)."""
    blocks = blocks or {}
    ratios = {}  # (type, distance) -> [GB/s over the default's]
    rows = {}  # type -> rows with a default figure
    for (kind, _shape, threads), cell in table.items():
        base = cell.get(-1)
        if not isinstance(base, float) or base <= 0 or (cpus is not None and threads > cpus):
            continue
        rows[kind] = rows.get(kind, 0) + 1
        for d, v in cell.items():
            if d >= 0 and (max_setting is None or d < max_setting) and isinstance(v, float) and v > 0:
                ratios.setdefault((kind, d), []).append(v / base)
    parts, notes = [], []
    for kind in sorted(rows):
        default_blocks = blocks.get((kind, -1))
        means = {d: math.exp(sum(map(math.log, r)) / len(r))
                 for (k, d), r in ratios.items()
                 if k == kind and len(r) == rows[kind]
                 and (default_blocks is None or blocks.get((k, d)) != default_blocks)}
        if not means:
            notes.append(f"{kind}: default kept (no setting has a figure on every row)")
            continue
        best = max(means, key=means.get)
        name = PICK_NAMES.get(kind)
        if means[best] >= PICK_MIN_GAIN and name is not None:
            parts.append(f"{name}={best}")
            notes.append(f"{kind}: {setting_name(best)}, geometric mean {means[best]:.3f}× the default's GB/s")
        else:
            notes.append(f"{kind}: default kept (best {setting_name(best)} at {means[best]:.3f}×, "
                         f"below {PICK_MIN_GAIN}×)")
    return ",".join(parts), notes


def write_pick(path, env, value, notes):
    """Prints the pick and its notes and writes value to path; False when path cannot be written."""
    print()
    print(f"{env} pick: {value or '(the defaults)'}")
    for n in notes:
        print(f"- {n}")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(value + ("\n" if value else ""))
    except OSError as e:
        print(f"bench_amx_table.py: {path}: {e.strerror}", file=sys.stderr)
        return False
    return True


def main(argv):
    args = argv[1:]
    paths = {}
    for flag in ("--pick", "--pick-streams"):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                print(f"bench_amx_table.py: {flag} needs a FILE", file=sys.stderr)
                return 2
            paths[flag] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 1:
        print("usage: bench_amx_table.py BENCH_AMX_OUTPUT [--pick FILE] [--pick-streams FILE]", file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        print(f"bench_amx_table.py: {args[0]}: {e.strerror}", file=sys.stderr)
        return 1
    blocks, streams_shown = {}, {}
    table, decode = parse(lines), parse_decode(lines, blocks)
    streams = parse_decode(lines, streams_shown, STREAMS_ROW, streams_in_force)
    if not table and not decode and not streams:
        print(f"bench_amx_table.py: {args[0]}: no bench_amx rows (BM_<name>/amx:<0|1>/shape:<n>/threads:<n>, "
              "BM_<type>Decode/prefetch:<bytes>/shape:<n>/threads:<n> "
              "or BM_<type>DecodeStreams/streams:<n>/shape:<n>/threads:<n>)", file=sys.stderr)
        return 1
    tables = [t for t in (render(table) if table else None, render_decode(decode) if decode else None,
                          render_decode(streams, streams_name, "decode streams") if streams else None) if t]
    print("\n\n".join(tables))
    cpus = cpus_of(lines)
    if "--pick" in paths:
        value, notes = pick(decode, blocks, cpus)
        if not write_pick(paths["--pick"], "SKIPKV_DECODE_PREFETCH", value, notes):
            return 1
    if "--pick-streams" in paths:
        value, notes = pick(streams, streams_shown, cpus, streams_name, NO_PREFETCH)
        if not write_pick(paths["--pick-streams"], "SKIPKV_DECODE_STREAMS", value, notes):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
