#!/usr/bin/env python3
"""Tests of scripts/bench_ab.py (label e2e).

The llama-bench parser reads real llama-bench output (tests/data/llama_bench);
the skipkv side and the whole protocol run the built `skipkv` binary for real,
twice per round, on the embedded testbed model: per-round records appended as
they finish, the ratio table, --resume, and a failing engine that leaves the
finished runs on disk.

Usage: bench_ab_test.py PATH_TO_SKIPKV [unittest args]
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench_ab.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_ab  # noqa: E402

SKIPKV = ""  # set from argv in __main__


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=240)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class ParseTest(unittest.TestCase):
    def test_real_llama_bench_output(self):
        with open(os.path.join(ROOT, "tests", "data", "llama_bench", "pp16_tg4_r2.jsonl"), encoding="utf-8") as f:
            tests = bench_ab.parse_llama_jsonl(f.read())
        self.assertEqual(sorted(tests), ["pp16", "tg4"])
        self.assertEqual(tests["pp16"], [51.9231, 51.9306])
        self.assertEqual(tests["tg4"], [20.7684, 20.2876])

    def test_llama_combined_test_and_surrounding_lines(self):
        rec = {"n_prompt": 512, "n_gen": 128, "samples_ts": [10.0, 12.0]}
        tests = bench_ab.parse_llama_jsonl("build: de3ff81\n" + json.dumps(rec) + "\n")
        self.assertEqual(tests, {"pp512+tg128": [10.0, 12.0]})

    def test_llama_record_without_samples_is_named(self):
        with self.assertRaises(bench_ab.UsageError) as ctx:
            bench_ab.parse_llama_jsonl('{"n_prompt": 16, "n_gen": 0}\n')
        self.assertIn("line 1", str(ctx.exception))
        self.assertIn("samples_ts", str(ctx.exception))

    def test_skipkv_batched_tests_keep_batch_and_depth(self):
        lines = [json.dumps({"test": "tg8", "batch": 1, "tokens_per_s": [3.0]}),
                 json.dumps({"test": "tg8", "batch": 16, "depth": 4096, "tokens_per_s": [30.0, 32.0]})]
        self.assertEqual(bench_ab.parse_skipkv_jsonl("\n".join(lines)),
                         {"tg8": [3.0], "tg8@b16d4096": [30.0, 32.0]})

    def test_engine_spec(self):
        e = bench_ab.parse_engine("base=skipkv:/tmp/a:b/skipkv")
        self.assertEqual((e.name, e.kind, e.path), ("base", "skipkv", "/tmp/a:b/skipkv"))
        for bad in ("skipkv", "x=skipkv", "x=gpu:/bin/true", "=llama:/bin/true"):
            with self.assertRaises(bench_ab.UsageError, msg=bad):
                bench_ab.parse_engine(bad)

    def test_ratios_are_per_round_then_median(self):
        engines = [bench_ab.Engine("a", "skipkv", "x"), bench_ab.Engine("b", "llama", "y")]
        recs = []
        for k, (a, b) in enumerate([(10.0, 20.0), (20.0, 10.0), (10.0, 15.0)], 1):
            recs.append({"round": k, "model": "m.gguf", "engine": "a", "test": "tg4", "mean_tokens_per_s": a})
            recs.append({"round": k, "model": "m.gguf", "engine": "b", "test": "tg4", "mean_tokens_per_s": b})
        table = bench_ab.summary_table(recs, engines, ["m.gguf"])
        # Per round 2.00, 0.50, 1.50: median 1.50 (the ratio of the medians would be 15 / 10 = 1.50
        # too here, the ratio of the means 15 / 13.3 = 1.12).
        self.assertIn("| m.gguf | – | tg4 | 10.00, 20.00, 10.00 | 20.00, 10.00, 15.00 | 2.00, 0.50, 1.50 | **1.50×** |",
                      table)


class RunTest(unittest.TestCase):
    def common(self, jsonl, rounds):
        return ["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", ":testbed:", "--rounds", str(rounds),
                "-p", "8", "-n", "4", "-r", "2", "--args", "a=--bandwidth-gbs 28", "--args", "b=--bandwidth-gbs 28",
                "--env", "b=SKIPKV_SIMD=emu128", "--jsonl", jsonl]

    def test_two_skipkv_engines_resume_and_failure(self):
        with tempfile.TemporaryDirectory() as tmp:
            jsonl = os.path.join(tmp, "ab.jsonl")
            p = run_script(*self.common(jsonl, 2))
            self.assertEqual(p.returncode, 0, p.stderr)
            recs = read_jsonl(jsonl)
            self.assertEqual(len(recs), 2 * 2 * 2)  # rounds x engines x tests
            self.assertEqual({(r["round"], r["engine"], r["test"]) for r in recs},
                             {(k, e, t) for k in (1, 2) for e in "ab" for t in ("pp8", "tg4")})
            for r in recs:
                self.assertEqual(len(r["tokens_per_s"]), 2)
                self.assertGreater(r["mean_tokens_per_s"], 0)
            self.assertEqual([r["command"]["env"] for r in recs if r["engine"] == "b"][0], {"SKIPKV_SIMD": "emu128"})
            self.assertIn("| b / a per round | median b / a |", p.stdout)
            self.assertRegex(p.stdout, r"\| :testbed: \| 2 \| tg4 \| [0-9.]+, [0-9.]+ \| [0-9.]+, [0-9.]+ \| "
                                       r"[0-9.]+, [0-9.]+ \| \*\*[0-9.]+×\*\* \|")
            self.assertIn("[4/4] round 2, :testbed:, 2 threads, b", p.stderr)

            # --resume with one more round runs only that round.
            p = run_script(*self.common(jsonl, 3), "--resume")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("[2/2] round 3", p.stderr)
            self.assertEqual(len(read_jsonl(jsonl)), 12)
            self.assertRegex(p.stdout, r"\| :testbed: \| 2 \| pp8 \| [0-9.]+, [0-9.]+, [0-9.]+ \|")

            # A failing engine: exit 1, its command named, the baseline's finished run kept.
            failed = os.path.join(tmp, "failed.jsonl")
            p = run_script("-e", f"a=skipkv:{SKIPKV}", "-e", "b=llama:/bin/false", "-m", ":testbed:", "--rounds", "1",
                           "-p", "8", "-n", "0", "-r", "1", "--jsonl", failed)
            self.assertEqual(p.returncode, 1)
            self.assertIn("b: `/bin/false -m :testbed:", p.stderr)
            self.assertIn("rerun with --resume", p.stderr)
            self.assertEqual([(r["engine"], r["test"]) for r in read_jsonl(failed)], [("a", "pp8")])

            # A --resume file that is not bench_ab's: named, exit 2.
            bad = os.path.join(tmp, "bad.jsonl")
            with open(bad, "w", encoding="utf-8") as f:
                f.write('{"round": 1}\n')
            p = run_script(*self.common(bad, 1), "--resume")
            self.assertEqual(p.returncode, 2)
            self.assertIn(f"{bad}:1: not a bench_ab record", p.stderr)

    def test_thread_list_times_each_count_alternated(self):
        with tempfile.TemporaryDirectory() as tmp:
            jsonl = os.path.join(tmp, "ab.jsonl")
            args = self.common(jsonl, 1) + ["-t", "1,2"]
            p = run_script(*args)
            self.assertEqual(p.returncode, 0, p.stderr)
            recs = read_jsonl(jsonl)
            self.assertEqual([(r["threads"], r["engine"]) for r in recs if r["test"] == "tg4"],
                             [(1, "a"), (1, "b"), (2, "a"), (2, "b")])
            for th in (1, 2):
                self.assertRegex(p.stdout, rf"\| :testbed: \| {th} \| tg4 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|")
            # --resume skips every finished (round, file, threads, engine) run.
            p = run_script(*args, "--resume")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len(read_jsonl(jsonl)), 8)

    def test_bad_arguments_name_what_is_wrong(self):
        cases = [
            (["-e", f"a=skipkv:{SKIPKV}", "-m", ":testbed:"], "at least two engines"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"a=skipkv:{SKIPKV}", "-m", ":testbed:"], "names must differ"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", "b=llama:/no/such/llama-bench", "-m", ":testbed:"],
             "/no/such/llama-bench is not an executable file"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", "/no/such.gguf"], "/no/such.gguf: no such file"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", ":testbed:", "-p", "0", "-n", "0"],
             "nothing to time"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", ":testbed:", "-t", "2,x"],
             "-t '2,x'"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", ":testbed:", "-t", "2,2"],
             "distinct"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", ":testbed:", "--env", "c=X=1"],
             "--env 'c=X=1'"),
            (["-e", f"a=skipkv:{SKIPKV}", "-e", f"b=skipkv:{SKIPKV}", "-m", ":testbed:", "--resume"],
             "--resume needs --jsonl"),
        ]
        for args, message in cases:
            p = run_script(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(message, p.stderr, args)


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: bench_ab_test.py PATH_TO_SKIPKV [unittest args]")
    SKIPKV = sys.argv[1]
    unittest.main(argv=[sys.argv[0], *sys.argv[2:]], verbosity=2)
