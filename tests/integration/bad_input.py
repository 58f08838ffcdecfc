#!/usr/bin/env python3
"""Bad-input suite: a seeded generator of hostile argument vectors, environments, config files and URI
files, each run against mongolock and checked.

Every case must: end within 10 s; exit with a documented code (0, 1, 64, 65, 69, 75, 76, 124, 126, 127,
an -E code the case gave, or the status of the case's own run command; never 70); print exactly one
"mongolock: error:" line when it exits 64, 65, 69, 126 or 127 (none when it exits 0); never print a planted
password; never print a raw control byte or invalid UTF-8; peak RSS under 64 MiB (GNU time).

Usage: bad_input.py --bin MONGOLOCK --uri TEST_URI --tmp DIR [--seed N] [--cases N] [--jobs N]
Prints one line per failed case (with the reproducing seed and case number) and a summary; exit 0 when
every case passed. The same seed always generates the same cases.
"""
import argparse
import os
import random
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TIME_LIMIT_S = 10
RSS_LIMIT_KIB = 64 * 1024
DOCUMENTED = {0, 1, 64, 65, 69, 75, 76, 124, 126, 127}
ERROR_CODES = {64, 65, 69, 126, 127}  # (126, 127: no run command of the generator exits so itself)
RUN_ONLY = {76, 124, 126, 127}
COMMANDS = ["acquire", "release", "renew", "run", "status", "list", "break", "doctor", "init"]
CONTROL = ["\x1b[31m", "\r", "\n", "\t", "\x00", "\x07", "\x1e", "\x7f", "\xc2\x85", "\xc2\x9b", "\x08"]
INVALID_UTF8 = [b"\xe9", b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x98"]


def secret(case):
    return f"Pw{case}x7Zq"


def planted_uri(rnd, case, port):
    """A URI that carries the case's password in its userinfo or a secret option."""
    pw = secret(case)
    scheme = rnd.choice(["mongodb", "mongodb", "mongodb+srv", "postgres", "redis"])
    host = rnd.choice([f"127.0.0.1:{port}", "db.invalid", f"127.0.0.1:{port},127.0.0.1:{port}", ""])
    form = rnd.randrange(5)
    if form == 0:
        return f"{scheme}://admin:{pw}@{host}/"
    if form == 1:
        return f"{scheme}://admin:{pw}@{host}/?appname=bad&connectTimeoutMS=soon"
    if form == 2:
        return f"mongodb://{host}/?tlsCertificateKeyFilePassword={pw}"
    if form == 3:
        return f"mongodb://u:{pw}@{host}/?authMechanismProperties=AWS_SESSION_TOKEN:{pw}"
    return f"{scheme}://admin:{pw}@{host}"


def text_bytes(s):
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s


def junk(rnd):
    """A short hostile string (bytes)."""
    parts = []
    for _ in range(rnd.randint(1, 4)):
        k = rnd.randrange(6)
        if k == 0:
            parts.append(rnd.choice(CONTROL).encode("latin-1") if rnd.random() < 0.5 else rnd.choice(CONTROL).encode())
        elif k == 1:
            parts.append(rnd.choice(INVALID_UTF8))
        elif k == 2:
            parts.append(rnd.choice([b"-", b"--", b"-x", b"--ttl", b"#", b"=", b"[", b"]", b"'", b'"', b"%", b"$(id)"]))
        elif k == 3:
            parts.append("é☕𝄞".encode())
        elif k == 4:
            parts.append(b"n" * rnd.choice([1, 199, 200, 201, 5000]))
        else:
            parts.append(bytes(rnd.randrange(1, 256) for _ in range(rnd.randint(1, 8))))
    return b"".join(parts)


def duration(rnd, mild=False):
    good = ["1s", "2s", "30s", "10m", "1h30m", "1.5s", "365d"]
    if mild:
        return rnd.choice(good)
    bad = ["", "0", "0s", "-5s", "10", "5x", "1h-5m", "366d", " 5s", "1e9s", "forever", "nan", "∞s", "99999999999999999999s"]
    return rnd.choice(good + bad) if rnd.random() < 0.6 else junk(rnd)


class Case:
    def __init__(self, seed, number, args):
        self.number = number
        rnd = random.Random(seed * 1_000_003 + number)
        self.rnd = rnd
        self.dir = os.path.join(args.tmp, f"case{number}")
        os.makedirs(self.dir, exist_ok=True)
        self.secret = secret(number)
        # A mild case is a valid command with one hostile element (a planted URI, a hostile variable or
        # config file), so that the server paths are reached too, not only the refusals.
        self.mild = rnd.random() < 0.45
        self.exit_codes = set()  # -E codes and run command statuses this case allows
        self.argv = self.make_argv(args)
        self.env = self.make_env(args)

    # --- pieces ---------------------------------------------------------------------------------------

    def name(self):
        rnd = self.rnd
        if self.mild or rnd.random() < 0.5:
            return f"bad-{self.number}-{rnd.randrange(1000)}".encode()
        return rnd.choice([b"", b"-x", b"a#1", f"bad-{self.number}".encode() + junk(rnd), junk(rnd)])

    def path(self, kind):
        """A path for a config file or a URI file: sometimes hostile."""
        rnd = self.rnd
        choice = rnd.randrange(10)
        if choice == 0:
            return b"/dev/zero"
        if choice == 1:
            return b"/dev/urandom"
        if choice == 2:
            fifo = os.path.join(self.dir, "fifo")
            if not os.path.exists(fifo):
                os.mkfifo(fifo)
            return fifo.encode()
        if choice == 3:
            return self.dir.encode()
        if choice == 4:
            return os.path.join(self.dir, "missing").encode()
        if choice == 5:
            big = os.path.join(self.dir, "big")
            with open(big, "wb") as f:
                f.write(b"# " + b"x" * (64 * 1024))
            return big.encode()
        target = os.path.join(self.dir, f"{kind}-{rnd.randrange(100)}")
        with open(target, "wb") as f:
            f.write(self.config_text() if kind == "config" else self.uri_text())
        return target.encode()

    def uri_text(self):
        rnd = self.rnd
        choice = rnd.randrange(4)
        if choice == 0:
            return (self.good_uri + "\n").encode()
        if choice == 1:
            return (planted_uri(rnd, self.number, self.closed_port) + "\n").encode()
        if choice == 2:
            return b"  \n" + junk(rnd)
        return junk(rnd) + b"\n" + text_bytes(planted_uri(rnd, self.number, self.closed_port))

    def config_text(self):
        rnd = self.rnd
        keys = ["uri", "uri-file", "db", "collection", "connect-timeout", "grace", "conflict-exit-code", "E",
                "verbose", "quiet", "v", "q", "ttl", "wait", "w", "min-hold", "fence", "slots", "on-lost",
                "kill-grace", "renew-interval", "renew-deadline", "timeout", "kill-after", "force", "json",
                "process", "token", "config", "help", "version", "NAME", "tll", "colection", "++", "--"]
        sections = ["", "acquire", "release", "renew", "run", "status", "list", "break", "doctor", "init",
                    "acquir", "default", "run.sub", "[run]", "\"run\""]
        lines = []
        for _ in range(rnd.randint(0, 8)):
            k = rnd.randrange(10)
            if k == 0:
                lines.append(b"[" + rnd.choice(sections).encode() + b"]")
            elif k == 1:
                lines.append(rnd.choice([b"# comment", b"; comment", b"", b"ab", b"x", b"[]", b"   "]))
            elif k == 2:
                lines.append(junk(rnd))
            elif k == 3:
                lines.append(b"uri = \"" + planted_uri(rnd, self.number, self.closed_port).encode() + b"\"")
            elif k == 4:
                lines.append(rnd.choice(keys).encode() + b" = [1s,")
            else:
                key = rnd.choice(keys)
                if key in ("conflict-exit-code", "E"):
                    code = rnd.choice([0, 3, 99, 255, 256, -1])
                    self.exit_codes.add(code)
                    value = str(code).encode()
                elif key in ("uri",):
                    value = b'"' + (self.good_uri if rnd.random() < 0.5 else planted_uri(rnd, self.number, self.closed_port)).encode() + b'"'
                elif key in ("uri-file",):
                    value = b'"' + os.path.join(self.dir, "missing").encode() + b'"'
                elif key in ("verbose", "quiet", "v", "q", "fence", "json", "force"):
                    value = rnd.choice([b"true", b"false", b"maybe", b"1", b""])
                elif key in ("slots",):
                    value = rnd.choice([b"1", b"2", b"0", b"1001", b"many", b"-3"])
                elif key == "on-lost":
                    value = rnd.choice([b"term", b"kill", b"ignore", b"explode"])
                elif key == "connect-timeout":
                    value = rnd.choice([b'"300ms"', b'"2s"', b"0s", b"5"])
                else:
                    value = b'"' + text_bytes(duration(rnd)) + b'"'
                lines.append(key.encode() + rnd.choice([b" = ", b"=", b" =", b"\t=\t"]) + value)
        return b"\n".join(lines) + rnd.choice([b"\n", b"", b"\r\n"])

    # --- the case ---------------------------------------------------------------------------------------

    def make_argv(self, args):
        rnd = self.rnd
        self.good_uri = args.uri
        self.closed_port = args.closed_port
        argv = []
        # Global options before the command.
        for _ in range(rnd.randint(0, 1 if self.mild else 3)):
            argv += self.global_option()
        if self.mild:
            command = rnd.choice(COMMANDS)
        else:
            command = rnd.choice(COMMANDS + ["frobnicate", junk(rnd), ""]) if rnd.random() < 0.95 else None
        if command is not None:
            argv.append(command.encode() if isinstance(command, str) else command)
        if command in ("acquire", "release", "renew", "status", "break", "run"):
            for _ in range(2 if command == "run" and rnd.random() < 0.3 else 1):
                if rnd.random() < 0.1:
                    argv.append(b"--")
                argv.append(self.name())
        for _ in range(rnd.randint(0, 3)):
            argv += self.command_option(command) if self.mild or rnd.random() < 0.7 else self.global_option()
        if command == "run" and self.mild:
            argv += [b"--ttl", b"2s"]
        if rnd.random() < 0.15:
            argv.append(text_bytes(planted_uri(rnd, self.number, self.closed_port)))
        if command == "run" or rnd.random() < 0.1:
            if rnd.random() < 0.85:
                argv.append(b"--")
                cmd = rnd.choice([[b"true"], [b"false"], [b"sh", b"-c", b"exit 3"], [b"/nonexistent/cmd"],
                                  [os.path.join(self.dir).encode()], [b"sh", b"-c", b"echo out; echo err >&2"], []])
                argv += cmd
                self.exit_codes.update({1, 3})
        if rnd.random() < 0.05:
            argv.append(rnd.choice([b"--help", b"-h", b"--version"]))
        return argv

    def global_option(self):
        rnd = self.rnd
        k = rnd.choice([2, 5, 6, 7]) if self.mild else rnd.randrange(12)
        if k == 0:
            return [b"--uri", text_bytes(planted_uri(rnd, self.number, self.closed_port))]
        if k == 1:
            return [b"--uri=" + text_bytes(planted_uri(rnd, self.number, self.closed_port))]
        if k == 2:
            return [b"--uri", self.good_uri.encode()]
        if k == 3:
            return [b"--uri-file", self.path("uri")]
        if k == 4:
            return [b"--config", self.path("config")]
        if k == 5:
            return [rnd.choice([b"--connect-timeout", b"--grace"]), text_bytes(duration(rnd, self.mild)) if rnd.random() < 0.5 else b"1s"]
        if k == 6:
            code = rnd.choice([0, 3, 42, 255] + ([] if self.mild else [256, -1]))
            self.exit_codes.add(code)
            return [rnd.choice([b"-E", b"--conflict-exit-code"]), str(code).encode()]
        if k == 7:
            return [rnd.choice([b"-v", b"-q", b"--verbose", b"--quiet"] + ([] if self.mild else [b"-vq"]))]
        if k == 8:
            return [rnd.choice([b"--db", b"--collection"]), junk(rnd)]
        if k == 9:
            return [rnd.choice([b"--uri", b"--uri-file", b"--config", b"-E", b"--bogus", b"-"])]
        if k == 10:
            return [junk(rnd)]
        return [b"--uri", b"--uri", text_bytes(planted_uri(rnd, self.number, self.closed_port))]

    def command_option(self, command):
        rnd = self.rnd
        options = [b"--ttl", b"--wait", b"-w", b"--min-hold", b"--kill-grace", b"--renew-interval",
                   b"--renew-deadline", b"--timeout", b"--kill-after"]
        if self.mild:
            valid = {"acquire": [[b"--ttl", b"30s"], [b"--fence"], [b"--slots", b"2"]], "renew": [[b"--ttl", b"1m"]],
                     "run": [[b"--fence"], [b"--timeout", b"30s"], [b"--on-lost", b"kill"]],
                     "status": [[b"--json"]], "list": [[b"--json"]], "break": [[b"--force"]]}
            return rnd.choice(valid.get(command, [[]]))
        k = rnd.randrange(9)
        if k <= 2:
            return [rnd.choice(options), text_bytes(duration(rnd, self.mild))]
        if k == 3:
            return [rnd.choice([b"--token", b"--process"]), rnd.choice([junk(rnd), b"0123456789abcdef0123456789abcdef", b"", b"web1:4242"])]
        if k == 4:
            return [b"--slots", rnd.choice([b"1", b"2", b"0", b"1001", b"x", b"-1"])]
        if k == 5:
            flags = {"acquire": [b"--fence"], "run": [b"--fence"], "status": [b"--json"], "list": [b"--json"],
                     "break": [b"--force"]}
            if self.mild:
                return flags.get(command, [])[:1]
            return [rnd.choice([b"--fence", b"--json", b"--force"])]
        if k == 6:
            return [b"--on-lost", rnd.choice([b"term", b"kill", b"ignore", junk(rnd)])]
        if k == 7:
            return [b"--process=" + junk(rnd)]
        return [junk(rnd)]

    def make_env(self, args):
        rnd = self.rnd
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.dir,
            "XDG_CONFIG_HOME": self.dir,
            "LC_ALL": "C",
            "MONGOC_DISABLE_SHM": "1",
            "MONGOLOCK_COLLECTION": args.collection,
            "MONGOLOCK_TEST_MARK": args.mark,
            # Against a closed port or an invalid host a command ends at once; the test server answers.
            "MONGOLOCK_URI": args.uri,
            "MONGOLOCK_CONNECT_TIMEOUT": "2s",
        }
        env = {k.encode(): v.encode() for k, v in env.items()}
        for _ in range(1 if self.mild else rnd.randint(0, 4)):
            k = rnd.randrange(10)
            if k == 0:
                env[b"MONGOLOCK_URI"] = text_bytes(planted_uri(rnd, self.number, self.closed_port))
            elif k == 1:
                env[b"MONGOLOCK_URI_FILE"] = self.path("uri")
            elif k == 2:
                env[b"MONGOLOCK_CONFIG"] = self.path("config")
            elif k == 3:
                env[rnd.choice([b"MONGOLOCK_TTL", b"MONGOLOCK_WAIT", b"MONGOLOCK_MIN_HOLD", b"MONGOLOCK_TIMEOUT",
                                b"MONGOLOCK_GRACE"])] = text_bytes(duration(rnd))
            elif k == 4:
                code = rnd.choice([0, 3, 255, 256])
                self.exit_codes.add(code)
                env[b"MONGOLOCK_CONFLICT_EXIT_CODE"] = str(code).encode()
            elif k == 5:
                env[rnd.choice([b"MONGOLOCK_VERBOSE", b"MONGOLOCK_QUIET"])] = rnd.choice([b"1", b"0", b"", junk(rnd)])
            elif k == 6:
                env[rnd.choice([b"MONGOLOCK_DB", b"MONGOLOCK_SLOTS", b"MONGOLOCK_ON_LOST"])] = junk(rnd)
            elif k == 7:
                env.pop(b"MONGOLOCK_URI", None)
            elif k == 8:
                # The server at a closed port: quick failures (69).
                env[b"MONGOLOCK_URI"] = f"mongodb://127.0.0.1:{self.closed_port}/".encode()
            else:
                env[b"MONGOLOCK_CONFIG"] = self.path("config")
        # Waiting and a long connect timeout could only make a case slow, not hostile: bounded here so
        # that every case can end within the limit (a FIFO is read for at most the connect timeout).
        for key in (b"MONGOLOCK_WAIT",):
            env.pop(key, None)
        return {k.replace(b"\0", b""): v.replace(b"\0", b"") for k, v in env.items() if k}

    def run(self, binary):
        argv = [a.replace(b"\0", b"") for a in self.argv]
        # Bounded options: no --wait/--timeout longer than a second, a connect timeout of at most 2 s.
        bounded = []
        skip = False
        for i, a in enumerate(argv):
            if skip:
                skip = False
                continue
            if a in (b"--wait", b"-w", b"--connect-timeout", b"--timeout") and i + 1 < len(argv) and b"--" not in argv[:i]:
                bounded += [a, b"1s"]
                skip = True
                continue
            bounded.append(a)
        rss_file = os.path.join(self.dir, "rss")
        cmd = [b"/usr/bin/time", b"-f", b"%M", b"-o", rss_file.encode(), os.path.abspath(binary).encode()] + bounded
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=self.dir, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=TIME_LIMIT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        took = time.monotonic() - start
        self.argv_run = bounded
        return self.check(proc.returncode, out, err, took, timed_out, rss_file)

    def check(self, rc, out, err, took, timed_out, rss_file):
        problems = []
        if timed_out:
            problems.append(f"did not end within {TIME_LIMIT_S} s")
        elif rc not in DOCUMENTED and rc not in self.exit_codes:
            problems.append(f"exit {rc} is not a documented code")
        elif rc in RUN_ONLY and b"run" not in self.argv_run and rc not in self.exit_codes:
            problems.append(f"exit {rc} is documented for run only")
        errors = [l for l in err.split(b"\n") if l.startswith(b"mongolock: error:")]
        if not timed_out and rc in ERROR_CODES and len(errors) != 1:
            problems.append(f"exit {rc} with {len(errors)} 'mongolock: error:' lines")
        if not timed_out and rc == 0 and errors:
            problems.append("exit 0 with an error line")
        # Log cuts a message at 4096 bytes; escaping can make each byte at most 4 ("\\xNN").
        longest = max((len(l) for l in err.split(b"\n")), default=0)
        if longest > 4 * 4096 + 200:
            problems.append(f"a stderr line of {longest} bytes")
        for label, data in (("stdout", out), ("stderr", err)):
            for form in {self.secret}:
                if form.encode() in data:
                    problems.append(f"the planted password is on {label}")
            if any(b < 0x20 and b not in (0x0a,) or b == 0x7f for b in data):
                problems.append(f"a raw control byte on {label}")
            try:
                text = data.decode("utf-8")
                if any(0x80 <= ord(c) <= 0x9f for c in text):
                    problems.append(f"a C1 control on {label}")
            except UnicodeDecodeError:
                problems.append(f"invalid UTF-8 on {label}")
        rss = 0
        try:
            with open(rss_file) as f:
                rss = int(f.read().strip().splitlines()[-1])
            if rss >= RSS_LIMIT_KIB:
                problems.append(f"peak RSS {rss} KiB")
        except (OSError, ValueError, IndexError):
            if not timed_out:
                problems.append("no RSS figure from GNU time")
        return problems, rc, out, err, took, rss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--uri", required=True)
    parser.add_argument("--tmp", required=True)
    parser.add_argument("--collection", default="t_bad_input")
    parser.add_argument("--mark", default="")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--closed-port", type=int, required=True)
    args = parser.parse_args()

    cases = [Case(args.seed, n, args) for n in range(args.cases)]
    start = time.monotonic()
    failed = 0
    codes = {}
    slowest = 0.0
    peak_rss = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for case, result in zip(cases, pool.map(lambda c: c.run(args.bin), cases)):
            problems, rc, out, err, took, rss = result
            codes[rc] = codes.get(rc, 0) + 1
            slowest = max(slowest, took)
            peak_rss = max(peak_rss, rss)
            if problems:
                failed += 1
                print(f"FAIL: seed {args.seed} case {case.number}: {'; '.join(problems)}")
                print(f"  argv: {[a for a in case.argv_run]!r}")
                print(f"  env: { {k: v for k, v in case.env.items() if k.startswith(b'MONGOLOCK_')}!r}")
                print(f"  exit {rc}, stdout {out[:300]!r}")
                print(f"  stderr {err[:600]!r}")
    total = time.monotonic() - start
    summary = ", ".join(f"{code}: {n}" for code, n in sorted(codes.items()))
    print(f"bad input: {args.cases} cases (seed {args.seed}), {failed} failed, {total:.1f} s "
          f"(slowest case {slowest:.1f} s, peak RSS {peak_rss} KiB); exit codes {summary}")
    # The cases must reach every layer: some pass (the server is used), some are refused.
    for code, least in ((0, args.cases // 20), (64, args.cases // 5)):
        if codes.get(code, 0) < least:
            print(f"FAIL: only {codes.get(code, 0)} cases exited {code}; expected at least {least} (is the generator broken?)")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
