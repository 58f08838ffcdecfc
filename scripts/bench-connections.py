#!/usr/bin/env python3
"""scripts/bench --connections: what a lease renewal costs, plain TCP and TLS + SCRAM side by side.

Starts two FerretDB instances (SQLite backend, loopback, debug listener for the metrics): one plain, one
with a TLS listener (certificates from scripts/test-certs) and a SCRAM user (--test-enable-new-auth). For
each it measures:

  connections  new server connections during a 20 s `run --ttl 3s -- sleep 20` (FerretDB's
               ferretdb_client_accepts_total); target: at most 1 after the first
  CPU/renewal  CPU of a D s `run --ttl 3s -- sleep D` less that of a `run -- true` (median of 5), divided
               by the renewals (one a second), for mongolock (its rusage, children included) and for the
               server (utime + stime from /proc/PID/stat); target: TLS + SCRAM within 2x of plain

Usage (from scripts/bench): bench-connections.py BINARY FERRETDB CERTS_SCRIPT DURATION_S
"""
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

binary, ferretdb, certs_script, duration = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
TICK = os.sysconf("SC_CLK_TCK")
PASSWORD = "bench-" + os.urandom(6).hex()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp, label, tls):
        self.label = label
        self.dir = os.path.join(tmp, label)
        os.makedirs(os.path.join(self.dir, "db"))
        self.port, self.debug = free_port(), free_port()
        args = [ferretdb, "--handler=sqlite", f"--sqlite-url=file:{self.dir}/db/", f"--state-dir={self.dir}/db",
                "--telemetry=disable", "--log-level=warn", f"--debug-addr=127.0.0.1:{self.debug}"]
        if tls:
            pki = os.path.join(tmp, "pki")
            args += [f"--listen-addr=127.0.0.1:{free_port()}", f"--listen-tls=127.0.0.1:{self.port}",
                     f"--listen-tls-cert-file={pki}/server.pem", f"--listen-tls-key-file={pki}/server.key",
                     "--test-enable-new-auth", "--setup-database=mongolock", "--setup-username=bench",
                     f"--setup-password={PASSWORD}"]
            self.uri = (f"mongodb://bench:{PASSWORD}@localhost:{self.port}/?tls=true&tlsCAFile={pki}/ca.pem"
                        "&authSource=mongolock")
        else:
            args += [f"--listen-addr=127.0.0.1:{self.port}"]
            self.uri = f"mongodb://127.0.0.1:{self.port}/"
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.accepts()
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"bench: error: FerretDB ({label}) did not start; see {self.dir}/server.log")
                time.sleep(0.1)
        self.uri_file = os.path.join(self.dir, "uri")
        with open(self.uri_file, "w") as f:
            f.write(self.uri + "\n")
        os.chmod(self.uri_file, 0o600)

    def accepts(self):
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.debug}/debug/metrics", timeout=5).read().decode()
        return int(sum(float(l.split()[-1]) for l in text.splitlines()
                       if l.startswith("ferretdb_client_accepts_total")))

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def run(server, *args):
    """Runs mongolock with ARGS; returns (its CPU in s, children included, the server's CPU in s)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MONGOLOCK_")}
    env.update(MONGOLOCK_COLLECTION="bench", MONGOC_DISABLE_SHM="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = server.cpu()
    p = subprocess.run([binary, "--uri-file", server.uri_file, *args], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    server_after = server.cpu()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"bench: error: mongolock {' '.join(args)} exited {p.returncode}: {p.stderr.strip()}")
    own = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return own, server_after - server_before


def measure(server):
    name = f"bench-{server.label}-{os.getpid()}"
    run(server, "run", name, "--", "true")  # warm-up: the collection and its index exist
    before = server.accepts()
    run(server, "run", "--ttl", "3s", name, "--", "sleep", "20")
    connections = server.accepts() - before
    base = [run(server, "run", name, "--", "true") for _ in range(5)]
    base_own = statistics.median(b[0] for b in base)
    base_server = statistics.median(b[1] for b in base)
    own, srv = run(server, "run", "--ttl", "3s", name, "--", "sleep", str(duration))
    renewals = duration  # --ttl 3s renews every second
    return {"connections": connections, "own": (own - base_own) / renewals * 1000,
            "server": (srv - base_server) / renewals * 1000, "run_true": base_own * 1000}


def main():
    with tempfile.TemporaryDirectory(prefix="mongolock-bench-") as tmp:
        subprocess.run([certs_script, os.path.join(tmp, "pki")], check=True, stdout=subprocess.DEVNULL)
        results = {}
        for label, tls in (("plain", False), ("tls+scram", True)):
            server = Server(tmp, label, tls)
            try:
                results[label] = measure(server)
            finally:
                server.stop()
    p, t = results["plain"], results["tls+scram"]
    ok = lambda cond: "OK" if cond else "OVER"
    print()
    print(f"connections: a lease renewal, plain TCP and TLS + SCRAM-SHA-256 (FerretDB, loopback; "
          f"CPU over a {duration} s run --ttl 3s)")
    print(f"  {'':<44} {'plain':>9} {'TLS+SCRAM':>10} {'ratio':>6}")
    print(f"  {'new server connections, 20 s run --ttl 3s':<44} {p['connections']:>9} {t['connections']:>10}")
    for key, label in (("own", "mongolock CPU per renewal (ms)"), ("server", "server CPU per renewal (ms)"),
                       ("run_true", "mongolock CPU of run -- true (ms)")):
        ratio = t[key] / p[key] if p[key] > 0 else float("inf")
        print(f"  {label:<44} {p[key]:>9.2f} {t[key]:>10.2f} {ratio:>5.1f}x")
    conn_ok = max(p["connections"], t["connections"]) - 1 <= 1
    print(f"  targets: at most 1 new connection after the first {ok(conn_ok)}; "
          f"TLS+SCRAM CPU per renewal within 2x of plain: mongolock "
          f"{ok(t['own'] <= 2 * max(p['own'], 0.05))}, server {ok(t['server'] <= 2 * max(p['server'], 2000 / TICK / duration))}")
    print("  (per renewal: CPU of the run less the median of 5 `run -- true`, over its renewals; the server's")
    print(f"   CPU is read from /proc in {1000 / TICK:.0f} ms ticks, the 2x checks allow that much noise)")


main()
