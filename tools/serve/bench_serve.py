#!/usr/bin/env python3
"""Load test for `bitnet serve` (or any OpenAI-compatible server): N concurrent clients each
send completion requests for a fixed time or count; reports requests/s, generated tokens/s
(aggregate: all tokens over the wall time, prompts included), decode tokens/s (the sum of the
concurrent streams' rates after their first token: clients x the mean over requests of
(tokens - 1) / (latency - TTFT)) and latency percentiles (whole request and time to first
token, from the SSE stream). Standard library only.

  tools/serve/bench_serve.py --url http://127.0.0.1:8080 --clients 1,4,8 --requests 16 --max-tokens 64
"""
import argparse
import json
import statistics
import threading
import time
import urllib.request


def one_request(url, prompt, max_tokens, api_key):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    req = urllib.request.Request(url + "/v1/completions", data=body, headers=headers)
    t0 = time.perf_counter()
    first = None
    tokens = 0
    with urllib.request.urlopen(req, timeout=600) as resp:
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("text") and first is None:
                first = time.perf_counter() - t0
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return time.perf_counter() - t0, first if first is not None else float("nan"), tokens


def run(url, clients, requests, prompts, max_tokens, api_key):
    results = []
    lock = threading.Lock()
    counter = [0]

    def worker():
        while True:
            with lock:
                if counter[0] >= requests:
                    return
                i = counter[0]
                counter[0] += 1
            r = one_request(url, prompts[i % len(prompts)], max_tokens, api_key)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = sorted(r[0] for r in results)
    ttft = sorted(r[1] for r in results)
    tokens = sum(r[2] for r in results)
    streams = [(r[2] - 1) / (r[0] - r[1]) for r in results if r[2] > 1 and r[0] > r[1]]
    decode = clients * statistics.mean(streams) if streams else float("nan")

    def pct(v, p):
        return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]

    return {"clients": clients, "requests": len(results), "seconds": wall, "requests_per_s": len(results) / wall,
            "tokens_per_s": tokens / wall, "decode_tokens_per_s": decode, "latency_p50_s": pct(lat, 50), "latency_p90_s": pct(lat, 90),
            "latency_p99_s": pct(lat, 99), "ttft_p50_s": pct(ttft, 50), "ttft_p90_s": pct(ttft, 90),
            "mean_tokens": statistics.mean(r[2] for r in results)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", default="1,4,8", help="comma-separated client counts")
    ap.add_argument("--requests", type=int, default=16, help="requests per client count")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--json", action="store_true", help="one JSON object per client count")
    args = ap.parse_args()
    prompts = ["Once upon a time", "The little dog", "In a small town there lived", "One day, Lily went to",
               "The sun was shining and", "Tom had a big red ball.", "Mia and her mom", "It was a cold winter day."]
    if not args.json:
        print("| clients | requests | req/s | gen tok/s | decode tok/s | latency p50 / p90 / p99 s | TTFT p50 / p90 s |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for n in [int(c) for c in args.clients.split(",")]:
        r = run(args.url.rstrip("/"), n, args.requests, prompts, args.max_tokens, args.api_key)
        if args.json:
            print(json.dumps(r))
        else:
            print(f"| {n} | {r['requests']} | {r['requests_per_s']:.2f} | {r['tokens_per_s']:.1f} | "
                  f"{r['decode_tokens_per_s']:.1f} | "
                  f"{r['latency_p50_s']:.2f} / {r['latency_p90_s']:.2f} / {r['latency_p99_s']:.2f} | "
                  f"{r['ttft_p50_s']:.3f} / {r['ttft_p90_s']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
