#!/usr/bin/env python3
"""The job of the fault-injection suites, and the checker that proves "never twice at once".

    holders.py job FILE [--seconds S] [--ignore-term]
        The job a holder runs under `mongolock run`. Appends to FILE (O_APPEND, one write(2) per
        line, so lines of concurrent writers never mix) a "start" line, then a "tick" line every
        10 ms while it runs (the work: a stale holder that keeps running shows up as ticks), and an
        "end" line when it ends by itself after S seconds (default 5; exit 0) or on SIGTERM (exit
        143; with --ignore-term it writes a "term" line and runs on). A job killed with SIGKILL
        leaves no "end": its last tick is when it was last seen running. A line is "KIND HOST PID MONO_NS REAL_NS TOKEN": HOST is gethostname(2) (a contender
        in its own UTS namespace is another host), MONO_NS CLOCK_MONOTONIC, REAL_NS CLOCK_REALTIME
        (both in ns), TOKEN the lock token mongolock passed in $MONGOLOCK_TOKEN.

    holders.py check FILE [--min-holders N] [--max-overlap-ms MS] [--gap-ms G]
        Each holder (HOST, PID, TOKEN) held from its first line to its last. Prints every holder
        (times in ms from the first start, on CLOCK_MONOTONIC), then "max_overlap_ms=X holders=N
        inside=K": X is the longest time two holders' intervals overlap (0 when none do), K the
        number of lines a job wrote inside another holder's interval (stretches, with --gap-ms). Exit 0 when X <= MS (default
        0) and at least N holders (default 2: a check that saw one holder proves nothing) ran; 1
        otherwise; 2 when FILE cannot be read or has a malformed line.
        With --gap-ms, a holder whose lines are more than G ms apart was stopped in between (as in a
        whole-holder freeze): it held from its first line to its last all the same, but only the
        stretches it ran in (lines at most G ms apart) count for X: X is then how long an old job
        ran on inside a new holder's interval.

    holders.py last FILE HOST
        REAL_NS (CLOCK_REALTIME, ns) of the last line written by a job of HOST; exit 1 when none.
"""
import os
import signal
import socket
import sys
import time

TICK_S = 0.01


def job(path, seconds, ignore_term):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    ident = f"{socket.gethostname()} {os.getpid()}"
    token = os.environ.get("MONGOLOCK_TOKEN", "-") or "-"

    def record(kind):
        line = f"{kind} {ident} {time.monotonic_ns()} {time.time_ns()} {token}\n"
        os.write(fd, line.encode())

    def on_term(_signum, _frame):
        if ignore_term:
            record("term")
            return
        record("end")
        os._exit(143)

    signal.signal(signal.SIGTERM, on_term)
    record("start")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(TICK_S)
        record("tick")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    record("end")
    return 0


def read_holders(path):
    """{(host, pid, token): {"mono": [...], "real": [...], "ended": bool}} in file order."""
    holders = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if len(fields) != 6 or fields[0] not in ("start", "tick", "term", "end"):
                raise ValueError(f"{path}:{number}: malformed line: {line!r}")
            kind, host, pid, mono, real, token = fields
            h = holders.setdefault((host, pid, token), {"mono": [], "real": [], "ended": False})
            h["mono"].append(int(mono))
            h["real"].append(int(real))
            h["ended"] = h["ended"] or kind == "end"
    for h in holders.values():
        h["mono"].sort()
        h["real"].sort()
    return holders


def segments(times, gap_ns):
    """[first, last] stretches of TIMES (sorted) whose neighbours are at most GAP_NS apart."""
    if gap_ns is None:
        return [(times[0], times[-1])]
    out, first = [], times[0]
    for prev, cur in zip(times, times[1:]):
        if cur - prev > gap_ns:
            out.append((first, prev))
            first = cur
    out.append((first, times[-1]))
    return out


def check(path, min_holders, max_overlap_ms, gap_ms):
    holders = read_holders(path)
    gap_ns = None if gap_ms is None else int(gap_ms * 1e6)
    ordered = sorted(holders.items(), key=lambda item: item[1]["mono"][0])
    origin = ordered[0][1]["mono"][0] if ordered else 0
    for (host, pid, token), h in ordered:
        stretches = ", ".join(f"{(a - origin) / 1e6:.1f} .. {(b - origin) / 1e6:.1f}" for a, b in segments(h["mono"], gap_ns))
        print(
            f"holder {host}:{pid} token {token[:8]}: {stretches} ms ({len(h['mono'])} lines, "
            f"{'ended' if h['ended'] else 'no end line: killed'})"
        )
    worst, pair, inside = 0, None, 0
    for i in range(len(ordered)):
        for j in range(len(ordered)):
            if i == j:
                continue
            a, b = ordered[i][1]["mono"], ordered[j][1]["mono"]
            inside += sum(1 for t in a if any(b0 <= t <= b1 for b0, b1 in segments(b, gap_ns)))
            if j < i:
                continue
            overlap = sum(
                max(0, min(a1, b1) - max(a0, b0))
                for a0, a1 in segments(a, gap_ns)
                for b0, b1 in segments(b, gap_ns)
            )
            if overlap > worst:
                worst, pair = overlap, (ordered[i][0], ordered[j][0])
    worst_ms = worst / 1e6
    print(f"max_overlap_ms={worst_ms:.1f} holders={len(ordered)} inside={inside}")
    ok = True
    if pair:
        print(f"overlap: {pair[0][0]}:{pair[0][1]} and {pair[1][0]}:{pair[1][1]} ran at once for {worst_ms:.1f} ms")
    if worst_ms > max_overlap_ms:
        print(f"FAIL: two holders overlapped for {worst_ms:.1f} ms (allowed: {max_overlap_ms} ms)")
        ok = False
    if len(ordered) < min_holders:
        print(f"FAIL: {len(ordered)} holder(s) ran, expected at least {min_holders}")
        ok = False
    return 0 if ok else 1


def last(path, host):
    holders = read_holders(path)
    times = [h["real"][-1] for (h_host, _, _), h in holders.items() if h_host == host]
    if not times:
        return 1
    print(max(times))
    return 0


def option(args, name, default, kind):
    if name in args:
        i = args.index(name)
        value = kind(args[i + 1])
        del args[i : i + 2]
        return value
    return default


def main(argv):
    args = argv[1:]
    try:
        if len(args) >= 2 and args[0] == "job":
            seconds = option(args, "--seconds", 5.0, float)
            ignore_term = "--ignore-term" in args
            if ignore_term:
                args.remove("--ignore-term")
            if len(args) == 2:
                return job(args[1], seconds, ignore_term)
        elif len(args) >= 2 and args[0] == "check":
            min_holders = option(args, "--min-holders", 2, int)
            max_overlap = option(args, "--max-overlap-ms", 0.0, float)
            gap = option(args, "--gap-ms", None, float)
            if len(args) == 2:
                return check(args[1], min_holders, max_overlap, gap)
        elif len(args) == 3 and args[0] == "last":
            return last(args[1], args[2])
    except (OSError, ValueError, IndexError) as e:
        print(f"holders.py: {e}", file=sys.stderr)
        return 2
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
