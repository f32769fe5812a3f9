#!/usr/bin/env python3
"""A small load generator for `skipkv serve` (issue 14): concurrent streaming
requests over loopback, with the time to first token and throughput measured
on the client side. Python standard library only; never needed at run time.

    load.py --url http://127.0.0.1:8080 --concurrency 8 --requests 16 \\
            --methods 'fullkv;rkv:budget=64,window=8,interval=16' --max-tokens 96 --json out.json
    load.py --url ... --duration 120 ...          # loop until 120 s have passed

Each request is POST /v1/completions with "stream": true and
"stream_options": {"include_usage": true}, temperature 0, one of --prompts
(round-robin) and one of --methods (round-robin, independently of the
prompt: request i gets prompt i % P and method i % M). A method is PRESET or
PRESET:FIELD=VALUE,...  and becomes the request's "kv" object (values parsed
as JSON numbers or booleans when they are). A request is valid by
construction, so any non-200 status, an error event in the stream, a stream
without [DONE] or without its usage chunk counts as failed.

Prints (and with --json writes) a summary: requests, failed, wall seconds,
completion tokens, tokens/s (completion tokens over wall time), time to first
token (first text chunk; mean, p50, p90, max) and the same per method.
Exit code 1 when any request failed, 0 otherwise.
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

DEFAULT_PROMPTS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
    "How much did she earn?",
    "Betty is saving money for a new wallet which costs $100. Betty has only half of the money she needs. "
    "Her parents decided to give her $15 for that purpose, and her grandparents twice as much as her "
    "parents. How much more money does Betty need to buy the wallet?",
    "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?",
]


def parse_method(spec):
    """'rkv:budget=64,window=8' -> {"policy": "rkv", "budget": 64, "window": 8}."""
    preset, _, fields = spec.partition(":")
    kv = {"policy": preset.strip()}
    for f in filter(None, (x.strip() for x in fields.split(","))):
        name, eq, value = f.partition("=")
        if not eq:
            raise SystemExit(f"--methods: '{f}' in '{spec}' must be FIELD=VALUE")
        try:
            kv[name] = json.loads(value)
        except json.JSONDecodeError:
            kv[name] = value
    return kv


def percentile(xs, q):
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def one_request(url, prompt, kv, max_tokens, timeout, api_key, extra=None):
    """Runs one streaming completion; a dict with ok, error, ttft, tokens, seconds.
    kv None sends no "kv" field (a server other than skipkv's); extra: more body
    fields (e.g. llama-server's "cache_prompt")."""
    u = urllib.parse.urlparse(url)
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if kv is not None:
        body["kv"] = kv
    if extra:
        body.update(extra)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    t0 = time.monotonic()
    out = {"ok": False, "error": None, "ttft": None, "tokens": 0, "seconds": 0.0}
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        resp = conn.getresponse()
        if resp.status != 200:
            out["error"] = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return out
        done = usage = False
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                out["error"] = "error event: " + json.dumps(ev["error"])[:300]
                return out
            if ev.get("choices") and ev["choices"][0].get("text") and out["ttft"] is None:
                out["ttft"] = time.monotonic() - t0
            if ev.get("usage"):
                usage = True
                out["tokens"] = ev["usage"]["completion_tokens"]
        if not done or not usage:
            out["error"] = "stream ended without " + ("[DONE]" if not done else "a usage chunk")
            return out
        out["ok"] = True
        return out
    except Exception as e:  # a refused connection, a timeout, bad JSON
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    finally:
        out["seconds"] = time.monotonic() - t0
        conn.close()


def run_load(url, prompts, methods, concurrency, requests, duration, max_tokens, timeout, api_key=None, extra=None):
    """Runs the load; the list of per-request results (with 'method')."""
    results, lock = [], threading.Lock()
    counter = iter(range(10**12))
    deadline = time.monotonic() + duration if duration else None

    def worker():
        while True:
            with lock:
                i = next(counter)
            if requests is not None and i >= requests:
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            label, kv = methods[i % len(methods)]
            r = one_request(url, prompts[i % len(prompts)], kv, max_tokens, timeout, api_key, extra)
            r["method"] = label
            r["index"] = i
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def summarize(results, wall):
    def block(rs):
        ttfts = [r["ttft"] for r in rs if r["ok"] and r["ttft"] is not None]
        tokens = sum(r["tokens"] for r in rs if r["ok"])
        return {"requests": len(rs), "failed": sum(not r["ok"] for r in rs), "completion_tokens": tokens,
                "ttft_mean_s": statistics.mean(ttfts) if ttfts else None,
                "ttft_p50_s": percentile(ttfts, 0.5), "ttft_p90_s": percentile(ttfts, 0.9),
                "ttft_max_s": max(ttfts) if ttfts else None}
    s = block(results)
    s["wall_s"] = wall
    s["tokens_per_s"] = s["completion_tokens"] / wall if wall > 0 else None
    s["per_method"] = {m: block([r for r in results if r["method"] == m])
                       for m in sorted({r["method"] for r in results})}
    s["errors"] = [f"request {r['index']} ({r['method']}): {r['error']}" for r in results if not r["ok"]][:20]
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, help="total requests (default: 2 x concurrency unless --duration)")
    ap.add_argument("--duration", type=float, help="keep starting requests until this many seconds have passed")
    ap.add_argument("--methods", default="", help="';'-separated PRESET[:FIELD=VALUE,...] (default: the server's)")
    ap.add_argument("--prompts", help="a file with one prompt per line (default: four GSM8K questions)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--api-key")
    ap.add_argument("--json", help="write the summary here")
    a = ap.parse_args()
    if a.concurrency < 1:
        raise SystemExit("--concurrency must be >= 1")
    prompts = DEFAULT_PROMPTS
    if a.prompts:
        with open(a.prompts, encoding="utf-8") as f:
            prompts = [line.rstrip("\n") for line in f if line.strip()]
    methods = [(m.strip(), parse_method(m.strip())) for m in a.methods.split(";") if m.strip()] or \
        [("server-default", None)]
    requests = a.requests if a.requests is not None else (None if a.duration else 2 * a.concurrency)
    t0 = time.monotonic()
    results = run_load(a.url, prompts, methods, a.concurrency, requests, a.duration, a.max_tokens, a.timeout,
                       a.api_key)
    s = summarize(results, time.monotonic() - t0)
    text = json.dumps(s, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 1 if s["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
