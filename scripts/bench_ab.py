#!/usr/bin/env python3
"""Alternate two or more engines on the same model files and report per-round ratios.

The measurement protocol of BENCHMARKS.md as a command: this machine's speed
drifts by tens of percent within minutes, so engines are never timed in
separate sessions. Each round runs every engine once per file and thread
count, in the order given (A B A B A B); a ratio is taken within a round, and
the summary is the median of the per-round ratios. `-t 2,4,8,16` times
several thread counts in one run (the many-core protocol of BENCHMARKS.md).

Engines (-e NAME=KIND:PATH, repeatable; the first is the baseline):
  skipkv  PATH is a `skipkv` binary, run as `PATH bench -m F -t T -p P -n N -r R --json TMP`
  llama   PATH is llama.cpp's `llama-bench`, run as `PATH -m F -t T -p P -n N -r R -o jsonl`
          (llama.cpp is built outside the repository; nothing of it is committed)

A test's figure is the mean of its timed repetitions (llama-bench's avg_ts;
for skipkv the mean of `tokens_per_s`), so both engines are summarised alike.

Every finished run is appended to --jsonl at once (one object per engine,
file, round and test); --resume skips the runs already there, so an
interrupted comparison continues where it stopped.

Examples:
  scripts/bench_ab.py -e llama=llama:/opt/llama.cpp/build/bin/llama-bench \\
      -e skipkv=skipkv:build/apps/skipkv/skipkv -m r1q4.gguf --rounds 3 \\
      --args llama='-lm none' --args skipkv='--bandwidth-gbs 28'
  scripts/bench_ab.py -e base=skipkv:/tmp/base/build/apps/skipkv/skipkv \\
      -e new=skipkv:build/apps/skipkv/skipkv -m r1q8.gguf -p 0 -n 64 --env new=SKIPKV_SIMD=avx2
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

KINDS = ("skipkv", "llama")


class UsageError(Exception):
    """A bad argument or input file: printed as one line, exit status 2."""


@dataclass
class Engine:
    name: str
    kind: str
    path: str
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def parse_engine(spec: str) -> Engine:
    """NAME=KIND:PATH -> Engine."""
    name, sep, rest = spec.partition("=")
    kind, sep2, path = rest.partition(":")
    if not sep or not sep2 or not name or not path:
        raise UsageError(f"-e {spec!r}: expected NAME=KIND:PATH, e.g. skipkv=skipkv:build/apps/skipkv/skipkv")
    if kind not in KINDS:
        raise UsageError(f"-e {spec!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return Engine(name=name, kind=kind, path=path)


def parse_llama_jsonl(text: str) -> dict[str, list[float]]:
    """llama-bench `-o jsonl` output -> {test name: tokens/s of each repetition}.

    A test is pp<n_prompt> when n_gen is 0, tg<n_gen> when n_prompt is 0, and
    pp<n_prompt>+tg<n_gen> otherwise (llama-bench's own naming)."""
    tests: dict[str, list[float]] = {}
    for line_no, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue  # llama-bench may print other lines around the records
        try:
            rec = json.loads(line)
            n_prompt, n_gen = int(rec["n_prompt"]), int(rec["n_gen"])
            samples = [float(v) for v in rec["samples_ts"]]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise UsageError(f"llama-bench output line {line_no}: not a llama-bench record ({e}): {line[:120]}")
        if n_gen == 0:
            name = f"pp{n_prompt}"
        elif n_prompt == 0:
            name = f"tg{n_gen}"
        else:
            name = f"pp{n_prompt}+tg{n_gen}"
        tests[name] = samples
    return tests


def parse_skipkv_jsonl(text: str) -> dict[str, list[float]]:
    """`skipkv bench --json` output -> {test name: tokens/s of each repetition}."""
    tests: dict[str, list[float]] = {}
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            name = str(rec["test"])
            if int(rec.get("batch", 1)) != 1:
                name += f"@b{int(rec['batch'])}d{int(rec.get('depth', 0))}"
            samples = [float(v) for v in rec["tokens_per_s"]]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise UsageError(f"skipkv bench --json line {line_no}: not a bench record ({e}): {line[:120]}")
        tests[name] = samples
    return tests


def parse_threads(spec: str) -> list[int]:
    """-t 2 or -t 2,4,8,16 -> [2] or [2, 4, 8, 16]."""
    try:
        threads = [int(x) for x in spec.split(",")]
    except ValueError:
        raise UsageError(f"-t {spec!r}: expected a thread count or a comma-separated list, e.g. 2,4,8,16")
    if not threads or min(threads) < 1 or len(set(threads)) != len(threads):
        raise UsageError(f"-t {spec!r}: thread counts must be distinct and at least 1")
    return threads


def run_engine(engine: Engine, model: str, threads: int, args: argparse.Namespace) -> dict[str, list[float]]:
    common = ["-m", model, "-t", str(threads), "-p", str(args.n_prompt), "-n", str(args.n_gen),
              "-r", str(args.repetitions)]
    env = dict(os.environ, **engine.env)
    with tempfile.TemporaryDirectory(prefix="bench_ab_") as tmp:
        json_path = os.path.join(tmp, "bench.jsonl")
        if engine.kind == "skipkv":
            cmd = [engine.path, "bench", *common, "--json", json_path, *engine.extra]
        else:
            cmd = [engine.path, *common, "-o", "jsonl", *engine.extra]
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise RuntimeError(f"{engine.name}: `{shlex.join(cmd)}` exited with {proc.returncode}:\n{tail}")
        if engine.kind == "skipkv":
            with open(json_path, encoding="utf-8") as f:
                tests = parse_skipkv_jsonl(f.read())
        else:
            tests = parse_llama_jsonl(proc.stdout)
    if not tests:
        raise RuntimeError(f"{engine.name}: `{shlex.join(cmd)}` reported no test")
    return tests


def load_done(path: str) -> list[dict]:
    """The records of an earlier run of --jsonl (for --resume)."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                for key in ("round", "model", "engine", "test", "tokens_per_s"):
                    rec[key]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise UsageError(f"{path}:{line_no}: not a bench_ab record ({e}); start a new --jsonl file")
            records.append(rec)
    return records


def fmt(x: float) -> str:
    return f"{x:.2f}"


def summary_table(records: list[dict], engines: list[Engine], models: list[str]) -> str:
    """Markdown: per file and test, every engine's figure per round, each
    engine's ratio to the baseline (the first engine) per round, and the
    median of those ratios."""
    base = engines[0].name
    head = ["file", "threads", "test"] + [f"{e.name} t/s" for e in engines]
    head += [f"{e.name} / {base} per round" for e in engines[1:]] + [f"median {e.name} / {base}" for e in engines[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_key: dict[tuple, float] = {}
    tests_in_order: list[tuple[str, int, str]] = []
    rounds: set[int] = set()
    for r in records:
        th = r.get("threads", 0)  # records of runs before -t took a list have none
        by_key[(r["model"], th, r["test"], r["engine"], r["round"])] = r["mean_tokens_per_s"]
        if (r["model"], th, r["test"]) not in tests_in_order:
            tests_in_order.append((r["model"], th, r["test"]))
        rounds.add(r["round"])
    for model in models:
        for m, th, test in tests_in_order:
            if m != model:
                continue
            cells = [os.path.basename(model), str(th) if th else "–", test]
            for e in engines:
                vals = [by_key.get((model, th, test, e.name, k)) for k in sorted(rounds)]
                cells.append(", ".join(fmt(v) if v is not None else "–" for v in vals))
            medians = []
            for e in engines[1:]:
                ratios = []
                for k in sorted(rounds):
                    a, b = by_key.get((model, th, test, base, k)), by_key.get((model, th, test, e.name, k))
                    if a and b is not None:
                        ratios.append(b / a)
                cells.append(", ".join(fmt(x) for x in ratios) if ratios else "–")
                medians.append(f"**{fmt(statistics.median(ratios))}×**" if ratios else "–")
            lines.append("| " + " | ".join(cells + medians) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="bench_ab.py", description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-e", "--engine", action="append", required=True, metavar="NAME=KIND:PATH",
                    help="an engine to time (repeat; the first is the baseline of every ratio)")
    ap.add_argument("-m", "--model", action="append", required=True, metavar="FILE",
                    help="a model file every engine loads (repeat for several files)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each runs every engine once per file (default 3)")
    ap.add_argument("-t", "--threads", default="2",
                    help="threads of every engine, or a comma-separated list timed in turn (default 2)")
    ap.add_argument("-p", "--n-prompt", type=int, default=512, help="prefill test tokens, 0 = none (default 512)")
    ap.add_argument("-n", "--n-gen", type=int, default=128, help="decode test tokens, 0 = none (default 128)")
    ap.add_argument("-r", "--repetitions", type=int, default=2, help="timed repetitions per test and run (default 2)")
    ap.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                    help="extra arguments for engine NAME, shell-quoted, e.g. llama='-lm none' (repeatable)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VAR=VALUE",
                    help="an environment variable for engine NAME only, e.g. skipkv=SKIPKV_SIMD=avx2 (repeatable)")
    ap.add_argument("--jsonl", metavar="FILE", help="append every finished run here (one object per test)")
    ap.add_argument("--resume", action="store_true", help="skip the runs already in --jsonl")
    args = ap.parse_args(argv)
    try:
        engines = [parse_engine(s) for s in args.engine]
        names = [e.name for e in engines]
        if len(set(names)) != len(names):
            raise UsageError(f"engine names must differ: {', '.join(names)}")
        if len(engines) < 2:
            raise UsageError("give at least two engines (-e), the first being the baseline")
        threads = parse_threads(args.threads)
        by_name = {e.name: e for e in engines}
        for spec in args.args:
            name, sep, extra = spec.partition("=")
            if not sep or name not in by_name:
                raise UsageError(f"--args {spec!r}: expected NAME=ARGS with NAME one of {', '.join(names)}")
            by_name[name].extra += shlex.split(extra)
        for spec in args.env:
            name, sep, assignment = spec.partition("=")
            var, sep2, value = assignment.partition("=")
            if not sep or not sep2 or not var or name not in by_name:
                raise UsageError(f"--env {spec!r}: expected NAME=VAR=VALUE with NAME one of {', '.join(names)}")
            by_name[name].env[var] = value
        for e in engines:
            if not (os.path.isfile(e.path) and os.access(e.path, os.X_OK)):
                raise UsageError(f"engine {e.name}: {e.path} is not an executable file")
        for m in args.model:
            if not m.startswith(":") and not os.path.exists(m):
                raise UsageError(f"model {m}: no such file")
        for flag, value, low in (("--rounds", args.rounds, 1), ("-r", args.repetitions, 1),
                                 ("-p", args.n_prompt, 0), ("-n", args.n_gen, 0)):
            if value < low:
                raise UsageError(f"{flag} {value}: must be at least {low}")
        if args.n_prompt == 0 and args.n_gen == 0:
            raise UsageError("-p 0 -n 0: nothing to time")
        if args.resume and not args.jsonl:
            raise UsageError("--resume needs --jsonl FILE")
        records = load_done(args.jsonl) if args.resume and args.jsonl and os.path.exists(args.jsonl) else []
    except UsageError as e:
        print(f"bench_ab.py: {e}", file=sys.stderr)
        return 2

    done = {(r["round"], r["model"], r.get("threads", threads[0]), r["engine"]) for r in records}
    runs = [(k, m, t, e) for k in range(1, args.rounds + 1) for m in args.model for t in threads for e in engines]
    todo = [x for x in runs if (x[0], x[1], x[2], x[3].name) not in done]
    out = open(args.jsonl, "a", encoding="utf-8") if args.jsonl else None
    started = time.monotonic()
    try:
        for i, (k, model, th, engine) in enumerate(todo):
            elapsed = time.monotonic() - started
            eta = f", ETA {elapsed / i * (len(todo) - i):.0f} s" if i else ""
            print(f"[{i + 1}/{len(todo)}] round {k}, {os.path.basename(model)}, {th} threads, {engine.name}"
                  f" ({elapsed:.0f} s{eta})", file=sys.stderr, flush=True)
            tests = run_engine(engine, model, th, args)
            for test, samples in tests.items():
                rec = {"round": k, "model": model, "threads": th, "engine": engine.name, "kind": engine.kind,
                       "test": test,
                       "tokens_per_s": samples, "mean_tokens_per_s": statistics.fmean(samples),
                       "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       "command": {"path": engine.path, "args": engine.extra, "env": engine.env}}
                records.append(rec)
                if out:
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
    except RuntimeError as e:
        print(f"bench_ab.py: {e}", file=sys.stderr)
        if out:
            print(f"bench_ab.py: finished runs are in {args.jsonl}; rerun with --resume to continue", file=sys.stderr)
        return 1
    finally:
        if out:
            out.close()
    for r in records:  # records from an earlier run may predate the field
        r.setdefault("mean_tokens_per_s", statistics.fmean(r["tokens_per_s"]))
    cmd = " ".join(shlex.quote(a) for a in ["scripts/bench_ab.py", *argv])
    print(f"\n```sh\n{cmd}\n```\n")
    print(summary_table(records, engines, args.model))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
