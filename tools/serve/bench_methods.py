#!/usr/bin/env python3
"""Serving benchmark (issue 14, BENCHMARKS.md): throughput and time to first
token of `skipkv serve` under a fixed concurrent load, one KV method at a
time, at the same --kv-memory limit, methods alternated round by round
(A B C A B C ...) on one server process so that machine noise hits each
method alike.

    bench_methods.py --binary build/apps/skipkv/skipkv -m MODEL.gguf --kv-memory 8MiB \\
        --methods 'fullkv;rkv:budget=32,window=8,interval=16;skipkv:budget=32,window=8,interval=16' \\
        --concurrency 8 --requests 8 --max-tokens 96 --rounds 3 [--json out.json]

Each run sends --requests streaming completions (temperature 0, the prompts
of tools/serve/load.py round-robin) from --concurrency client threads, all
with the run's method in "kv"; one short warm-up request per method comes
first. Per run: completion tokens / wall seconds, and the time to first
token (client side: request sent -> first text chunk), mean and p50. The
summary gives per method the median over rounds and the median of the
per-round ratios to the first method. Exit code 1 when any request failed.

--llama-server BINARY adds llama.cpp's server as one more engine, alternated
with the methods in every round: it is started on the same model with
--concurrency slots (-np) of --llama-ctx-per-slot positions each, the same
-t, f16 KV (its default), and its requests carry no "kv" field but
"cache_prompt": false (the load repeats its prompts, and skipkv serve has
no prompt cache) and "ignore_eos": true.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--kv-memory", required=True)
    ap.add_argument("--methods", required=True, help="';'-separated PRESET[:FIELD=VALUE,...]")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", help="one prompt per line (default: load.py's four GSM8K questions)")
    ap.add_argument("--json", help="write every run and the summary here")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary: one more engine per round")
    ap.add_argument("--llama-ctx-per-slot", type=int, default=256,
                    help="llama-server: positions per slot (-c = this x --concurrency)")
    a = ap.parse_args()
    # (label, kv field, which server, extra body fields)
    methods = [(m.strip(), load.parse_method(m.strip()), "skipkv", None) for m in a.methods.split(";") if m.strip()]
    prompts = load.DEFAULT_PROMPTS
    if a.prompts:
        with open(a.prompts, encoding="utf-8") as f:
            prompts = [line.rstrip("\n") for line in f if line.strip()]

    cmd = [a.binary, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads), "--kv-memory", a.kv_memory,
           "--max-queue", "256"]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if "listening on http://" not in line:
        server.kill()
        print("server did not start:", line, server.stderr.read(), file=sys.stderr)
        return 1
    urls = {"skipkv": line.strip().split("listening on ", 1)[1]}
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    llama = None
    runs, failed = [], 0
    try:
        if a.llama_server:
            llama, urls["llama"] = start_llama_server(a)
            if llama is None:
                return 1
            methods.append(("llama-server", None, "llama", {"cache_prompt": False, "ignore_eos": True}))
        for label, kv, where, extra in methods:  # warm-up: method tables, first-touch pages
            r = load.one_request(urls[where], prompts[0], kv, 4, 600, None, extra)
            if not r["ok"]:
                print(f"warm-up of {label} failed: {r['error']}", file=sys.stderr)
                return 1
        for rnd in range(a.rounds):
            for label, kv, where, extra in methods:
                t0 = time.monotonic()
                res = load.run_load(urls[where], prompts, [(label, kv)], a.concurrency, a.requests, None,
                                    a.max_tokens, 1800, None, extra)
                s = load.summarize(res, time.monotonic() - t0)
                failed += s["failed"]
                run = {"round": rnd + 1, "method": label, "tokens_per_s": s["tokens_per_s"],
                       "completion_tokens": s["completion_tokens"], "wall_s": s["wall_s"],
                       "ttft_mean_s": s["ttft_mean_s"], "ttft_p50_s": s["ttft_p50_s"], "failed": s["failed"]}
                runs.append(run)
                print(json.dumps(run), flush=True)
    finally:
        for p in (server, llama):
            if p is not None:
                p.terminate()
                p.wait(timeout=120)

    base = methods[0][0]
    summary = []
    for label, *_ in methods:
        mine = [r for r in runs if r["method"] == label]
        ratios_tps, ratios_ttft = [], []
        for r in mine:
            b = next(x for x in runs if x["method"] == base and x["round"] == r["round"])
            ratios_tps.append(r["tokens_per_s"] / b["tokens_per_s"])
            ratios_ttft.append(r["ttft_mean_s"] / b["ttft_mean_s"])
        summary.append({
            "method": label,
            "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in mine),
            "ttft_mean_s_median": statistics.median(r["ttft_mean_s"] for r in mine),
            "ttft_p50_s_median": statistics.median(r["ttft_p50_s"] for r in mine),
            "tokens_per_s_ratio_median": statistics.median(ratios_tps),
            "ttft_ratio_median": statistics.median(ratios_ttft),
        })
    print("\n| method | tokens/s (median) | TTFT mean (s, median) | TTFT p50 (s, median) | "
          "tokens/s vs %s | TTFT vs %s |" % (base, base))
    print("|---|---:|---:|---:|---:|---:|")
    for s in summary:
        print("| %s | %.2f | %.2f | %.2f | %.2f× | %.2f× |" % (
            s["method"], s["tokens_per_s_median"], s["ttft_mean_s_median"], s["ttft_p50_s_median"],
            s["tokens_per_s_ratio_median"], s["ttft_ratio_median"]))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"command": vars(a), "runs": runs, "summary": summary}, f, indent=2)
            f.write("\n")
    return 1 if failed else 0


def start_llama_server(a):
    """Starts llama-server on a free loopback port; (process, url), or (None, None) when it
    does not answer /health within 10 minutes."""
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    cmd = [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
           "-np", str(a.concurrency), "-c", str(a.concurrency * a.llama_ctx_per_slot),
           "-t", str(a.threads), "-tb", str(a.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print("llama-server exited with", proc.returncode, "command:", " ".join(cmd), file=sys.stderr)
            return None, None
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    print("llama-server:", " ".join(cmd), file=sys.stderr)
                    return proc, url
        except OSError:  # not listening yet, or 503 while loading
            pass
        time.sleep(1)
    proc.kill()
    print("llama-server did not become healthy:", " ".join(cmd), file=sys.stderr)
    return None, None


if __name__ == "__main__":
    sys.exit(main())
