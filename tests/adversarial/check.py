#!/usr/bin/env python3
"""check.py FILE: overlap between runs (grouped by TOKEN, i.e. one run = one lock acquisition) in a
holders.py job file. Prints per-token intervals (ms, CLOCK_MONOTONIC) and max cross-token overlap."""
import sys
runs = {}
for line in open(sys.argv[1]):
    if len(line.split()) != 6: continue  # extra tokens of a multi-name run
    kind, host, pid, mono, real, token = line.split()
    t = int(mono) / 1e6
    lo, hi = runs.get(token, (t, t))
    runs[token] = (min(lo, t), max(hi, t))
t0 = min(lo for lo, _ in runs.values())
best = 0.0
items = sorted(runs.items(), key=lambda kv: kv[1][0])
for tok, (lo, hi) in items:
    print(f"run {tok[:8]}: {lo - t0:.1f} .. {hi - t0:.1f} ms")
for i, (_, (a0, a1)) in enumerate(items):
    for _, (b0, b1) in items[i + 1:]:
        best = max(best, min(a1, b1) - max(a0, b0))
print(f"runs={len(runs)} max_cross_run_overlap_ms={max(best, 0):.1f}")
