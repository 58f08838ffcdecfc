#!/usr/bin/env python3
"""scripts/bench --waiters: what idle `--wait` waiters cost the server.

Starts FerretDB (SQLite backend, loopback, debug listener for the metrics), holds one lock with
`acquire --ttl 120s`, then starts N `run --wait 90s NAME -- true` waiters behind it. Once they have all
joined the queue and the line has stood still for over 10 s (SETTLE: the first two in line then stop
following the wake-up events and look now and then instead), it reads the server's CPU (utime + stime from /proc/PID/stat) and its
request counters (ferretdb_client_requests_total, per command) over WINDOW s, and the same over a window
with the lock held and nobody waiting (the baseline). Then it releases the lock and times the handover
of the whole queue (every waiter's `true` ran once, one after the other; none overlapped is checked by
the queue tests, this only reports the time).

Targets (issue #15): N = 30 idle waiters cost the server under 5 % of a core (above the baseline) and
under 1 request a second each.

Usage (from scripts/bench): bench-waiters.py BINARY FERRETDB [N] [WINDOW_S]
"""
import collections
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

binary, ferretdb = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 30
window = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
SETTLE = 12.0  # past QueueTiming::follow_idle (10 s): an idle line, as when a long job holds the lock
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "server")
        os.makedirs(os.path.join(self.dir, "db"))
        self.port, self.debug = free_port(), free_port()
        args = [ferretdb, "--handler=sqlite", f"--sqlite-url=file:{self.dir}/db/", f"--state-dir={self.dir}/db",
                "--telemetry=disable", "--log-level=warn", f"--debug-addr=127.0.0.1:{self.debug}",
                f"--listen-addr=127.0.0.1:{self.port}"]
        self.uri = f"mongodb://127.0.0.1:{self.port}/"
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.requests()
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"bench: error: FerretDB did not start; see {self.dir}/server.log")
                time.sleep(0.1)

    def requests(self):
        """Requests so far, per command (ferretdb_client_requests_total{...command="find"...})."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.debug}/debug/metrics", timeout=5).read().decode()
        counts = collections.Counter()
        for line in text.splitlines():
            if not line.startswith("ferretdb_client_requests_total"):
                continue
            labels, value = line.rsplit(" ", 1)
            command = "?"
            for part in labels[labels.find("{") + 1:labels.rfind("}")].split(","):
                key, _, val = part.partition("=")
                if key == "command":
                    command = val.strip('"')
            counts[command] += int(float(value))
        return counts

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def sample(server, seconds):
    cpu0, req0 = server.cpu(), server.requests()
    time.sleep(seconds)
    cpu1, req1 = server.cpu(), server.requests()
    req1.subtract(req0)
    return (cpu1 - cpu0) / seconds, {k: v for k, v in req1.items() if v > 0}


def main():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONGOLOCK_")}
    env.update(MONGOLOCK_COLLECTION="bench", MONGOC_DISABLE_SHM="1")
    with tempfile.TemporaryDirectory(prefix="mongolock-bench-") as tmp:
        server = Server(tmp)
        base = [binary, "--uri", server.uri]
        waiters = []
        try:
            subprocess.run(base + ["acquire", "--ttl", "120s", "idle"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            time.sleep(1)
            idle_cpu, idle_req = sample(server, window)
            for _ in range(count):
                waiters.append(subprocess.Popen(base + ["run", "--wait", "90s", "idle", "--", "true"], env=env,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            time.sleep(SETTLE)
            cpu, req = sample(server, window)
            released = time.monotonic()
            subprocess.run(base + ["break", "--force", "idle"], env=env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            failed = 0
            for w in waiters:
                _, err = w.communicate(timeout=120)
                failed += w.returncode != 0
            drained = time.monotonic() - released
        finally:
            for w in waiters:
                if w.poll() is None:
                    w.kill()
            server.stop()
    total = sum(req.values())
    extra = max(cpu - idle_cpu, 0.0)
    ok = lambda cond: "OK" if cond else "OVER"
    print()
    print(f"waiters: {count} idle `run --wait` waiters behind one held lock (FerretDB, loopback; {window:.0f} s windows)")
    print(f"  server CPU, held lock, nobody waiting   {idle_cpu * 100:6.1f} % of a core "
          f"({sum(idle_req.values()) / window:.1f} requests/s)")
    print(f"  server CPU with {count} waiters            {cpu * 100:6.1f} % of a core "
          f"(+{extra * 100:.1f} %; target < 5 %: {ok(extra < 0.05)})")
    print(f"  requests per waiter per second          {total / window / count:6.2f} "
          f"(target < 1: {ok(total / window / count < 1)})")
    print(f"  requests by command: " + ", ".join(f"{k} {v / window:.1f}/s" for k, v in sorted(req.items())))
    print(f"  the whole queue ran once after the release in {drained:.1f} s "
          f"({drained / count * 1000:.0f} ms a waiter; {failed} waiters failed)")


main()
