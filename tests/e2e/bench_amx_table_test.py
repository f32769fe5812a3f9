#!/usr/bin/env python3
"""Tests of scripts/bench_amx_table.py (label e2e), the device protocol's AMX
on / off table. tests/data/bench_amx/amx_machine.txt holds rows in bench_amx's
Google Benchmark console format: the first amx:0 rows from a Zen 5 run, the
others written by hand as an AMX machine would report them (an error row,
k-scaled counters); they must pair amx:0 with amx:1 per benchmark, shape and
thread count.

Usage: bench_amx_table_test.py [unittest args]
"""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "bench_amx_table.py")
DATA = os.path.join(ROOT, "tests", "data", "bench_amx", "amx_machine.txt")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=60)


class BenchAmxTableTest(unittest.TestCase):
    def test_pairs_off_and_on_per_benchmark_shape_and_threads(self):
        r = run(DATA)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line for line in r.stdout.splitlines() if line.startswith("| BM_")]
        self.assertEqual(rows, [
            "| BM_Q8_0x16Batch | 8960 × 1536 | 1 | 227.3 | 500.2 | 2.20× |",
            "| BM_Q8_0x16Batch | 1536 × 8960 | 1 | 176.6 | tile test hook: refused | — |",
            "| BM_Q4_Kx16Batch16 | 8960 × 1536 | 16 | 1200.0 | 900.0 | 0.75× |",
        ])

    def test_no_rows_and_missing_file_are_errors(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("Running bench_amx\nno benchmark rows here\n")
            f.flush()
            r = run(f.name)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no bench_amx rows", r.stderr)
        r = run(os.path.join(ROOT, "no-such-bench_amx.txt"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("no-such-bench_amx.txt", r.stderr)
        self.assertEqual(run().returncode, 2)


if __name__ == "__main__":
    unittest.main()
