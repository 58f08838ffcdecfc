#!/usr/bin/env python3
"""scripts/bench --compare: the current build against a baseline build, side by side in one run.

    bench-compare.py CURRENT BASELINE FLOOR RUNS [--contention | --only-contention]

CURRENT, BASELINE: mongolock binaries; FLOOR: scripts/bench-floor.c built (the commands an executed run
needs, with libmongoc; its "floor --contract" row adds the holder file, guardian and job cgroup a run keeps
by contract; its "floor, no SASL plugins" row starts without Cyrus SASL's plugins, as mongolock does unless the
URI names GSSAPI). With BENCH_FLOOR_STATIC (a path), the same floor linked as mongolock is, libmongoc from its
archive, is a row too ("floor, static libmongoc"): the link's own gain is then not counted as mongolock's.
The server is MONGOLOCK_TEST_URI (scripts/test-server starts it). Every figure is
taken interleaved (current, baseline, floor, etcd in an order shuffled anew each round, RUNS rounds: in a
rotating order each tool always ran right after the same one, and the one after etcd paid for it, 1.04-1.05x
current against a copy of itself) and read as paired
ratios: the median over rounds of (current / other) of that round, so that the load of a shared machine
moves both sides of a ratio alike. Printed:

- server commands of an executed `run NAME -- true` (MONGOLOCK_DEBUG_COMMANDS=1), each binary;
- the system calls of one such run, its guardian and job included (strace -f -c, when installed);
- one-shot `run NAME -- true`: median wall and CPU time (user + system, children included) of each, paired
  ratios current/baseline, current/floor, current/floor --contract, current/etcd; first with an empty history, then again after
  10,000 runs of ten names were stored (half of them skipped attempts naming a holder's lock, as a fleet
  writes them);
- with --contention: 8 waiters queued behind a holder, 200 ms jobs, 5 rounds (handover gap median / p95)
  and 8 workers x 5 runs (max wait), each binary and etcd, rounds interleaved.
The load average is printed beside each section: on a shared machine read the CPU ratios first.
"""
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import pymongo

current, baseline, floor, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with_contention = "--contention" in sys.argv[5:]
only_contention = "--only-contention" in sys.argv[5:]  # the one-shot sections left out
uri = os.environ["MONGOLOCK_TEST_URI"]
COLLECTION = f"cmp{os.getpid()}"
env = {k: v for k, v in os.environ.items() if not k.startswith("MONGOLOCK_")}
env.update(MONGOLOCK_URI=uri, MONGOLOCK_COLLECTION=COLLECTION, ETCDCTL_API="3")
DATABASE = "mongolock"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_etcd(tmp):
    if not (shutil.which("etcd") and shutil.which("etcdctl")):
        return None, None
    client, peer = free_port(), free_port()
    proc = subprocess.Popen(["etcd", "--data-dir", os.path.join(tmp, "etcd"), "--name", "bench",
                             "--listen-client-urls", f"http://127.0.0.1:{client}",
                             "--advertise-client-urls", f"http://127.0.0.1:{client}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-cluster", f"bench=http://127.0.0.1:{peer}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"127.0.0.1:{client}"
    for _ in range(100):
        if subprocess.run(["etcdctl", "--endpoints", endpoint, "endpoint", "health"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, env=env).returncode == 0:
            return proc, endpoint
        time.sleep(0.1)
    proc.kill()
    return None, None


def load():
    """The load average (1, 5 min) and the number of CPUs, printed beside the figures."""
    with open("/proc/loadavg") as f:
        one, five = f.read().split()[:2]
    return f"load average {one}, {five} on {os.cpu_count()} CPUs"


def timed(argv, extra_env=None):
    """Runs argv; returns (wall ms, CPU ms): user + system time of it and the children it waited for."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=dict(env, **(extra_env or {})), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = (time.perf_counter() - start) * 1000
    child.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"bench: error: {' '.join(argv)} exited {code}: {err.decode(errors='replace')}")
    return elapsed, (usage.ru_utime + usage.ru_stime) * 1000


def syscalls(argv):
    """The system calls of one run of argv and its children (strace -f -c), or None without strace."""
    if not shutil.which("strace"):
        return None
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["strace", "-f", "-c", "-o", out.name, *argv], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        for line in out.read().splitlines():
            if line.rstrip().endswith(" total"):
                return int(line.split()[3])
    return None


def commands(binary, name):
    done = subprocess.run([binary, "run", name, "--", "true"], env=dict(env, MONGOLOCK_DEBUG_COMMANDS="1",
                          MONGOLOCK_HISTORY_PURGE_EVERY="1000000000"), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=True)
    for line in done.stderr.decode().splitlines():
        if "server commands:" in line:
            return line.split("server commands: ", 1)[1]
    return "?"


def one_shot(tools, label):
    """Interleaved rounds of every tool's one cycle; prints medians and paired ratios to 'current', of the
    wall time and of the CPU time (user + system, children included: what the load changes least)."""
    times = {name: [] for name in tools}
    cpu = {name: [] for name in tools}
    order = list(tools)
    shuffle = random.Random(1)  # the same orders every time
    before = load()
    for _ in range(runs):
        shuffle.shuffle(order)
        for name in order:
            argv, extra_env = tools[name] if isinstance(tools[name], tuple) else (tools[name], None)
            wall, used = timed(argv, extra_env)
            times[name].append(wall)
            cpu[name].append(used)
    print(f"\none-shot `run NAME -- true`, {label}: median of {runs} interleaved rounds, paired ratios")
    print(f"  ({before} before, {load()} after)")
    print(f"  {'':<26} {'wall':>9} {'current / this':>15} {'CPU':>9} {'current / this':>15}")
    for name in tools:
        ratio = statistics.median(c / o for c, o in zip(times["current"], times[name]))
        cpu_ratio = statistics.median(c / max(o, 0.1) for c, o in zip(cpu["current"], cpu[name]))
        print(f"  {name:<26} {statistics.median(times[name]):>6.1f} ms {ratio:>14.2f}x"
              f" {statistics.median(cpu[name]):>6.1f} ms {cpu_ratio:>14.2f}x")
    return times


def plant_history(count=10_000, names=10):
    """`count` run records of `names` names, half executed, half skipped attempts naming their lock."""
    client = pymongo.MongoClient(uri)
    coll = client[DATABASE][COLLECTION + "_runs"]
    now = int(time.time() * 1000)
    docs = []
    for i in range(count):
        name = f"planted-{i % names}"
        lock = f"lock-{i // 20}"
        ended = now - (count - i) * 1000
        if i % 2 == 0:
            docs.append({"name": name, "process": "h:1", "host": "h", "user": "u", "command": ["true"],
                         "ended_at": ended, "outcome": "ok", "exit_code": 0, "lock": lock, "waited_ms": 0})
        else:
            docs.append({"name": name, "process": "h:2", "host": f"h{i % 7}", "user": "u", "command": ["true"],
                         "ended_at": ended, "outcome": "skipped", "exit_code": 75, "held_lock": lock,
                         "held_by": "h:1", "waited_ms": 0})
    for d in docs:
        d["ended_at"] = __import__("datetime").datetime.fromtimestamp(d["ended_at"] / 1000,
                                                                     __import__("datetime").timezone.utc)
    coll.insert_many(docs)
    client.close()


JOB = 'echo "s $EPOCHREALTIME $1" >>"$2"; sleep 0.2; echo "e $EPOCHREALTIME $1" >>"$2"'


def read_log(path):
    events = {}
    with open(path) as f:
        for line in f:
            kind, t, label = line.split()
            events.setdefault(label, {})[kind] = float(t)
    return events


def burst(prefix, hold, tmp, tag, waiters=8):
    """One round: gaps (ms) between one job's end and the next one's start, `waiters` queued behind a holder."""
    log = os.path.join(tmp, f"burst-{tag}")
    go = os.path.join(tmp, f"go-{tag}")
    started = os.path.join(tmp, f"started-{tag}")
    holder = subprocess.Popen([*hold, "bash", "-c", f'touch "{started}"; while [ ! -e "{go}" ]; do sleep 0.01; done;'
                               f' echo "e $EPOCHREALTIME holder" >>"{log}"'], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The holder must hold before the waiters come (on a loaded machine its start can take longer than
    # a waiter's): wait for its job to start.
    for _ in range(3000):
        if os.path.exists(started) or holder.poll() is not None:
            break
        time.sleep(0.01)
    if not os.path.exists(started):
        sys.exit(f"bench: error: the holder {' '.join(hold)} did not start its job")
    procs = []
    for i in range(waiters):
        procs.append(subprocess.Popen([*prefix, "bash", "-c", JOB, "_", f"w{i}", log], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.05)
    time.sleep(1.0)
    open(go, "w").close()
    holder.wait()
    for p in procs:
        p.wait()
    events = read_log(log)
    gaps, previous = [], events["holder"]["e"]
    for start, end in sorted((v["s"], v["e"]) for k, v in events.items() if k != "holder"):
        gaps.append((start - previous) * 1000)
        previous = end
    return gaps


def workers(prefix, tmp, tag, count=8, repeats=5):
    log = os.path.join(tmp, f"workers-{tag}")
    script = ('for i in $(seq 1 "$REPEATS"); do echo "r $EPOCHREALTIME $W.$i" >>"$LOG"; '
              '"$@" bash -c "$JOB" _ "$W.$i" "$LOG"; done')
    procs = [subprocess.Popen(["bash", "-c", script, "_", *prefix],
                              env=dict(env, REPEATS=str(repeats), LOG=log, W=f"w{k}", JOB=JOB),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for k in range(count)]
    for p in procs:
        p.wait()
    grants = sorted(read_log(log).values(), key=lambda v: v["s"])
    return max(g["s"] - g["r"] for g in grants)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def contention(tools, tmp, rounds=5):
    # A collection of its own: the 10,000 planted runs would make the baseline's every run scan them.
    env["MONGOLOCK_COLLECTION"] = COLLECTION + "c"
    gaps = {name: [] for name in tools}
    waits = {name: [] for name in tools}
    order = list(tools)
    before = load()
    for r in range(rounds):
        for name in order[r % len(order):] + order[:r % len(order)]:
            prefix, hold = tools[name]
            gaps[name] += burst(prefix, hold, tmp, f"{name.replace(' ', '_')}-{r}")
            waits[name].append(workers(prefix, tmp, f"{name.replace(' ', '_')}-{r}"))
    print(f"\ncontention, 200 ms jobs, {rounds} interleaved rounds: 8 waiters queued behind a holder (gap: one job's"
          " end to the next one's start), 8 workers x 5 runs (max wait; paired ratio to etcd per round)")
    print(f"  ({before} before, {load()} after)")
    print(f"  {'':<12} {'gap median':>10} {'gap p95':>9} {'max wait (median of rounds)':>28} {'vs etcd':>8}")
    for name in tools:
        ratio = ""
        if "etcdctl lock" in waits:
            ratio = f"{statistics.median(w / e for w, e in zip(waits[name], waits['etcdctl lock'])):.2f}x"
        print(f"  {name:<12} {statistics.median(gaps[name]):>7.1f} ms {percentile(gaps[name], 95):>6.1f} ms"
              f" {statistics.median(waits[name]):>26.2f} s {ratio:>8}")
    for name in tools:
        print(f"  {name}: the largest gaps (of {len(gaps[name])}): "
              + ", ".join(f"{g:.1f}" for g in sorted(gaps[name])[-4:][::-1]) + " ms")
    client = pymongo.MongoClient(uri)
    for name, suffix in (("current", "c"), ("baseline", "cb")):
        events = client[DATABASE + "_events"][COLLECTION + suffix + "_events"]
        print(f"  {name}: {events.estimated_document_count()} wake-up events stored at the end")
    client.close()


def main():
    print(f"bench --compare: current {current}\n                 baseline {baseline}\n                 floor {floor}")
    print(f"server {uri}, collection {COLLECTION}")
    print("\nserver commands of an executed `run NAME -- true` (MONGOLOCK_DEBUG_COMMANDS=1, no purge)")
    for label, binary in (("current", current), ("baseline", baseline)):
        commands(binary, f"count-{label}")  # the first run of a name creates collections
        print(f"  {label:<9} {commands(binary, f'count-{label}')}")
    print(f"  {'floor':<9} 5 (listIndexes 1, insert 2, findAndModify 1, endSessions 1: by construction)")
    counted = {label: syscalls(argv) for label, argv in (
        ("current", [current, "run", "count-current", "--", "true"]),
        ("baseline", [baseline, "run", "count-baseline", "--", "true"]),
        ("floor", [floor, uri, DATABASE, COLLECTION + "_floor", "count-floor"]),
        ("floor --contract", [floor, uri, DATABASE, COLLECTION + "_floor", "count-floor", "--contract"]))}
    if None not in counted.values():
        print("\nsystem calls of one `run NAME -- true`, its guardian and job included (strace -f -c)")
        for label, count in counted.items():
            print(f"  {label:<16} {count}")
    with tempfile.TemporaryDirectory() as tmp:
        etcd, endpoint = start_etcd(tmp)
        try:
            tools = {"current": [current, "run", "one", "--", "true"],
                     "baseline": [baseline, "run", "one-b", "--", "true"],
                     "floor": [floor, uri, DATABASE, COLLECTION + "_floor", "one-f"],
                     # The floor plus what a run does on the host by contract: holder file, guardian, job cgroup.
                     "floor --contract": [floor, uri, DATABASE, COLLECTION + "_floor", "one-g", "--contract"]}
            # The floor without Cyrus SASL's plugins, which mongolock loads only for GSSAPI and libmongoc's
            # initializer loads in every program (Cyrus reads SASL_PATH): like for like with mongolock's start.
            tools["floor, no SASL plugins"] = ([floor, uri, DATABASE, COLLECTION + "_floor", "one-n"],
                                               {"SASL_PATH": "/nonexistent/sasl2"})
            if os.environ.get("BENCH_FLOOR_STATIC"):
                tools["floor, static libmongoc"] = [os.environ["BENCH_FLOOR_STATIC"], uri, DATABASE,
                                                    COLLECTION + "_floor", "one-s"]
            if etcd:
                tools["etcdctl lock"] = ["etcdctl", "--endpoints", endpoint, "lock", "one", "--", "true"]
            else:
                print("  etcd is not installed (scripts/setup --bench): no etcdctl lock row")
            if not only_contention:
                one_shot(tools, "empty history")
                plant_history()
                # The same binary on an empty collection beside it, interleaved: the history's own cost. The
                # baseline apart (its rounds after these): its find on `_runs` keeps the server busy for
                # seconds, which would be charged to whatever runs next.
                empty = {"MONGOLOCK_COLLECTION": f"{COLLECTION}e"}  # in the environment: no env(1) exec timed
                base = tools.pop("baseline")
                tools["current, empty history"] = ([current, "run", "one", "--", "true"], empty)
                times = one_shot(tools, "after 10,000 stored runs of ten names")
                ratio = statistics.median(a / b for a, b in zip(times["current"], times["current, empty history"]))
                print(f"  current: 10,000 stored runs / empty history (paired median): {ratio:.2f}x")
                times = one_shot({"current": tools["current"], "baseline": base,
                                  "baseline, empty history": ([baseline, "run", "one-b", "--", "true"], empty)},
                                 "after 10,000 stored runs, the baseline")
                ratio = statistics.median(a / b for a, b in zip(times["baseline"], times["baseline, empty history"]))
                print(f"  baseline: 10,000 stored runs / empty history (paired median): {ratio:.2f}x")
            if with_contention or only_contention:
                # Each binary its own collections, wake-up events included (FerretDB's waiting cursors scan
                # every stored event: one binary's events must not slow the other's handovers).
                cur = ["env", f"MONGOLOCK_COLLECTION={COLLECTION}c", current]
                base = ["env", f"MONGOLOCK_COLLECTION={COLLECTION}cb", baseline]
                ctools = {"current": ([*cur, "run", "c-cur", "--wait", "forever", "--"], [*cur, "run", "c-cur", "--"]),
                          "baseline": ([*base, "run", "c-base", "--wait", "forever", "--"],
                                       [*base, "run", "c-base", "--"])}
                if etcd:
                    e = ["etcdctl", "--endpoints", endpoint, "lock", "c-etcd", "--"]
                    ctools["etcdctl lock"] = (e, e)
                contention(ctools, tmp)
        finally:
            if etcd:
                etcd.send_signal(signal.SIGTERM)
                etcd.wait()
    client = pymongo.MongoClient(uri)
    for suffix in ("", "_runs", "_lastrun", "_queue", "_fences", "_floor", "_floor_runs", "e", "e_runs", "e_lastrun",
                   "c", "c_runs", "c_lastrun", "c_queue", "c_fences", "cb", "cb_runs", "cb_lastrun", "cb_queue",
                   "cb_fences"):
        client[DATABASE].drop_collection(COLLECTION + suffix)
    client.close()


main()
