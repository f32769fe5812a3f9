#!/usr/bin/env python3
"""Bounded soak of `skipkv serve` (issue 14): starts the server on a loopback
port, keeps it under concurrent mixed-method streaming load (tools/serve/load.py)
for --duration seconds, samples its resident memory (VmRSS) every second, and
fails when

  * any request failed (every request sent is valid), or
  * RSS grew by more than --rss-bound-mib between the end of the warm-up
    (--warmup seconds: allocator pools, method tables and thread stacks
    settle) and any later sample, or
  * after the load, /metrics shows K/V still allocated, a request not
    counted as completed, or the server does not exit 0 on SIGTERM.

    soak.py --binary build/apps/skipkv/skipkv [--model FILE] [--duration 120] [--json out.json]

Registered as the CTest test serve_soak with the label `soak` (not in the
default label set): ctest --test-dir build -L soak. Prints a JSON summary.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402

STORY_PROMPTS = ["Once upon a time", "The cat sat on", "Lily and Ben", "One day, a little", "Tom had a big",
                 "The sun was", "There was a girl", "A dog named", "Mom said", "The bird flew"]
METHODS = ["fullkv", "rkv:budget=24,window=4,interval=8", "streaming:budget=16,window=4,interval=8",
           "snapkv:budget=20,window=4,interval=8", "h2o:budget=28,window=4,interval=8",
           "rkv+sentence:budget=32,window=4,interval=8"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", help="default: the embedded stories260K")
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--warmup", type=float, default=20)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--kv-memory", default="256KiB")
    ap.add_argument("--rss-bound-mib", type=float, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the summary here")
    a = ap.parse_args()

    cmd = [a.binary, "serve", "--port", "0", "-t", str(a.threads), "--kv-memory", a.kv_memory,
           "--max-queue", "64"]
    if a.model:
        cmd += ["-m", a.model]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if "listening on http://" not in line:
        server.kill()
        print("server did not start:", line, server.stderr.read(), file=sys.stderr)
        return 1
    url = line.strip().split("listening on ", 1)[1]
    # Drain stderr so the server never blocks on a full pipe.
    err_lines = []
    threading.Thread(target=lambda: err_lines.extend(server.stderr), daemon=True).start()

    samples, stop = [], threading.Event()
    t0 = time.monotonic()

    def sampler():
        while not stop.is_set():
            samples.append((time.monotonic() - t0, rss_kib(server.pid)))
            stop.wait(1.0)

    threading.Thread(target=sampler, daemon=True).start()
    methods = [(m, load.parse_method(m)) for m in METHODS]
    lt0 = time.monotonic()
    results = load.run_load(url, STORY_PROMPTS, methods, a.concurrency, None, a.duration, a.max_tokens, 300)
    summary = load.summarize(results, time.monotonic() - lt0)
    stop.set()
    time.sleep(1.5)
    m = metrics(url)
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = -1

    base = [kib for t, kib in samples if t <= a.warmup]
    after = [kib for t, kib in samples if t > a.warmup]
    failures = []
    if summary["failed"]:
        failures.append(f"{summary['failed']} of {summary['requests']} requests failed: {summary['errors'][:3]}")
    if not base or not after:
        failures.append("too few RSS samples (duration must exceed the warm-up)")
        growth_mib = None
    else:
        growth_mib = (max(after) - base[-1]) / 1024
        if growth_mib > a.rss_bound_mib:
            failures.append(f"RSS grew {growth_mib:.1f} MiB after the warm-up (bound {a.rss_bound_mib} MiB)")
    if m.get("skipkv_kv_allocated_bytes") != 0:
        failures.append(f"K/V still allocated after the load: {m.get('skipkv_kv_allocated_bytes')}")
    if m.get("skipkv_requests_completed_total") != summary["requests"]:
        failures.append(f"completed_total {m.get('skipkv_requests_completed_total')} != {summary['requests']} sent")
    if rc != 0:
        failures.append(f"server exit code {rc} after SIGTERM")
    out = {
        "duration_s": a.duration, "warmup_s": a.warmup, "concurrency": a.concurrency, "methods": METHODS,
        "max_tokens": a.max_tokens, "kv_memory": a.kv_memory,
        "requests": summary["requests"], "failed": summary["failed"],
        "completion_tokens": summary["completion_tokens"], "tokens_per_s": summary["tokens_per_s"],
        "ttft_p50_s": summary["ttft_p50_s"], "ttft_p90_s": summary["ttft_p90_s"],
        "rss_start_mib": samples[0][1] / 1024 if samples else None,
        "rss_after_warmup_mib": base[-1] / 1024 if base else None,
        "rss_max_after_warmup_mib": max(after) / 1024 if after else None,
        "rss_end_mib": samples[-1][1] / 1024 if samples else None,
        "rss_growth_after_warmup_mib": growth_mib, "rss_bound_mib": a.rss_bound_mib,
        "kv_peak_allocated_bytes": m.get("skipkv_kv_peak_allocated_bytes"),
        "kv_compressions": m.get("skipkv_kv_compressions_total"),
        "server_exit_code": rc, "failures": failures,
    }
    text = json.dumps(out, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
