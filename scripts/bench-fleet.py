#!/usr/bin/env python3
"""scripts/bench --fleet: what a fleet's crontab minute costs, and `list` on a fleet (issue #16).

Run by scripts/bench under scripts/test-server (MONGOLOCK_TEST_URI). Three parts:

1. Herds: N processes start `run NAME -- sleep 1` at the same moment (N hosts whose crontab fires the same
   minute), for N = 50 and 200: wall time of the whole herd, exit codes (0 for each run of the job, which
   can be more than one when the herd takes longer to start than the 1 s job; the rest 75), and per
   skipped process the server commands after the handshake (MONGOLOCK_DEBUG_COMMANDS=1, endSessions
   aside) and the writes among them (insert, update, delete, findAndModify). Target: at most 4 commands and
   2 writes per skipped run.
2. Rounds: 10 more herds of 50 on one name; then `history NAME --json` must list every executed run (11
   of them, the first herd's included) however many skipped attempts were recorded.
3. `list` with H held locks (H = 1,000; 100 of them with a last run): median wall time of 5 runs and its
   server commands, beside `list` with 1 held lock in the same run (the ratio is what counts on a shared
   machine). Targets: about 3 commands, under 1 s.

Usage: bench-fleet.py BINARY [HELD]
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

binary = sys.argv[1]
held = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
uri = os.environ["MONGOLOCK_TEST_URI"]
suffix = str(os.getpid())
COMMANDS = re.compile(r"server commands: (\d+) \(([^)]*)\)")
WRITES = ("insert", "update", "delete", "findAndModify")


def env(collection, **extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("MONGOLOCK_")}
    e.update(MONGOLOCK_URI=uri, MONGOLOCK_COLLECTION=collection, **extra)
    return e


def counts(stderr):
    """(commands after the handshake without endSessions, writes) from a debug command count line."""
    m = COMMANDS.search(stderr)
    if not m:
        return None
    per = dict((name, int(n)) for name, n in (part.split() for part in m.group(2).split(", ")))
    commands = sum(n for name, n in per.items() if name not in ("endSessions", "hello", "isMaster"))
    return commands, sum(per.get(w, 0) for w in WRITES)


# Each process as a host of its own (its own UTS namespace, host-1, host-2, ...) where unshare works (root).
OWN_HOSTS = subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode == 0


def herd_command(name, i):
    cmd = [binary, "run", name, "--", "sleep", "1"]
    if not OWN_HOSTS:
        return cmd
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', f"host-{i + 1}"] + cmd


def herd(collection, name, n):
    start = time.monotonic()
    procs = [
        subprocess.Popen(herd_command(name, i), env=env(collection, MONGOLOCK_DEBUG_COMMANDS="1"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for i in range(n)
    ]
    results = [(p.wait(), p.stderr.read()) for p in procs]
    wall = time.monotonic() - start
    codes = sorted(code for code, _ in results)
    skipped = [counts(err) for code, err in results if code == 75]
    return wall, codes, [s for s in skipped if s]


def run(args, collection, **extra):
    return subprocess.run([binary] + args, env=env(collection, **extra), capture_output=True, text=True)


def part_herds():
    print(f"## herds: N runs of one name at once (`run herd -- sleep 1`), "
          f"{'each as a host of its own' if OWN_HOSTS else 'all on this host'}")
    print("| N | wall | exit 0 | exit 75 | other | commands per skipped run (max) | writes (max) | target |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = True
    for n in (50, 200):
        collection = f"fleet_herd{n}_{suffix}"
        wall, codes, skipped = herd(collection, "herd", n)
        zeros, held75 = codes.count(0), codes.count(75)
        cmax = max(c for c, _ in skipped) if skipped else None
        wmax = max(w for _, w in skipped) if skipped else None
        # More than one 0 is no overlap: a herd that takes longer to start than the 1 s job runs it again
        # (without --min-hold); the commands and writes of the skipped ones are the target.
        good = zeros + held75 == n and cmax is not None and cmax <= 4 and wmax <= 2
        ok = ok and good
        print(f"| {n} | {wall:.2f} s | {zeros} | {held75} | {n - zeros - held75} | {cmax} | {wmax} | "
              f"<= 4 commands, <= 2 writes: {'OK' if good else 'OVER'} |")
    return ok


def part_rounds():
    collection = f"fleet_rounds_{suffix}"
    herd(collection, "herd", 50)
    for _ in range(10):
        herd(collection, "herd", 50)
    out = run(["history", "herd", "--json"], collection)
    data = json.loads(out.stdout)
    executed = [r for r in data["runs"] if r["outcome"] not in ("skipped", "not-due")]
    summary = data["summary"]
    good = len(executed) == 11
    print()
    print("## 11 rounds of 50 on one name, then `history --json`")
    print(f"executed runs listed: {len(executed)} of 11 ({'OK' if good else 'MISSING'}); "
          f"summary: {summary['runs']} records, {summary['ok']} ok, {summary['skipped']} skipped")
    return good


def timed_list(collection, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.monotonic()
        out = run(["list"], collection, MONGOLOCK_DEBUG_COMMANDS="1")
        times.append(time.monotonic() - start)
        if out.returncode != 0:
            raise SystemExit(f"bench-fleet: list failed: {out.stderr.strip()}")
    return statistics.median(times), counts(out.stderr)


def part_list():
    small = f"fleet_list1_{suffix}"
    run(["acquire", "one", "--ttl", "10m", "--process", "bench:1"], small)
    big = f"fleet_list_{suffix}"
    for i in range(held):
        r = run(["acquire", f"job-{i:04d}", "--ttl", "10m", "--process", f"bench:{i + 2}"], big)
        if r.returncode != 0:
            raise SystemExit(f"bench-fleet: acquire failed: {r.stderr.strip()}")
    for i in range(0, held, max(1, held // 100)):  # a last run for about 100 of them
        run(["run", f"ran-{i:04d}", "--", "true"], big)
        run(["acquire", f"ran-{i:04d}", "--ttl", "10m", "--process", f"bench:{100000 + i}"], big)
    t1, c1 = timed_list(small)
    tn, cn = timed_list(big)
    good = cn is not None and cn[0] <= 3 and tn < 1.0
    print()
    print(f"## `list` with {held} held locks (about 100 with a last run) vs 1 held lock, same run")
    print("| held locks | median wall (5 runs) | server commands | target |")
    print("| --- | --- | --- | --- |")
    print(f"| 1 | {t1 * 1000:.0f} ms | {c1[0] if c1 else '?'} | |")
    print(f"| {held} | {tn * 1000:.0f} ms | {cn[0] if cn else '?'} | about 3 commands, under 1 s: "
          f"{'OK' if good else 'OVER'} |")
    print(f"ratio {held} locks / 1 lock: {tn / t1:.1f}x")
    return good


if __name__ == "__main__":
    results = [part_herds(), part_rounds(), part_list()]
    sys.exit(0)
