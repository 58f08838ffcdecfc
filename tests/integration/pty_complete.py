#!/usr/bin/env python3
"""Completion as a person meets it: an interactive shell in a pseudo-terminal, a line typed, TAB pressed.

usage: pty_complete.py SHELL SCRIPT LINE [LINE...]

Starts SHELL (bash, zsh or fish) interactively in a pseudo-terminal (200 columns), loads its completion
system (bash-completion, zsh's compinit, fish's own) and the completion SCRIPT, then for each LINE types it,
presses TAB and prints what the terminal showed in answer (escape sequences removed), after a line
"=== LINE". It waits for what it can see, never a fixed time: for the typed line to be shown, then for
the shell's answer to the TAB (its first output after it: fish draws nothing while more keys are waiting,
so the next keys go only after it has drawn; up to 10 s when it shows nothing at all, i.e. nothing to
complete), then it types Ctrl-U and a command that prints a marker and reads until the marker comes back.
The shell's PATH and environment are this process's: put the mongolock under test first on PATH.
Exits 1 with the terminal's output when the shell does not answer within 30 s.
"""

import os
import pty
import re
import select
import struct
import sys
import termios
import fcntl
import time

ROWS, COLS = 60, 200
TIMEOUT = 30.0


def setup_lines(shell, script):
    if shell == "bash":
        return [
            "PS1='$ '; PROMPT_COMMAND=",
            "source /usr/share/bash-completion/bash_completion",
            "bind 'set show-all-if-ambiguous on'; bind 'set bell-style none'",
            "bind 'set completion-query-items 10000'; bind 'set page-completions off'",
            f"source '{script}'",
        ]
    if shell == "zsh":
        return [
            "PS1='$ '; unsetopt LIST_AMBIGUOUS; setopt AUTO_LIST NO_BEEP; LISTMAX=10000",
            f"fpath=('{os.path.dirname(script)}' $fpath); autoload -Uz compinit; compinit -u -D",
        ]
    if shell == "fish":
        return [
            "function fish_prompt; echo -n '$ '; end; set -g fish_greeting ''",
            "set -g fish_autosuggestion_enabled 0",
            f"source '{script}'",
        ]
    raise SystemExit(f"unknown shell {shell}")


def command(shell):
    if shell == "bash":
        return ["bash", "--norc", "--noprofile", "-i"]
    if shell == "zsh":
        return ["zsh", "-f", "-i"]
    return ["fish", "--no-config", "-i"]


ANSI = re.compile(rb"\x1b\[[0-9;?<=>]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-B]|\x1b[=>78DEHM]")


def clean(data):
    text = ANSI.sub(b"", data).replace(b"\r", b"")
    return bytes(c for c in text if c >= 32 or c == 10).decode("utf-8", "replace")


class Terminal:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm"
            os.execvp(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.seen = b""
        self.pending = b""  # read, not yet returned
        self.count = 0

    def send(self, text):
        os.write(self.fd, text.encode())

    def read_until(self, marker):
        """Reads until `marker` (bytes) appears; returns everything up to and including it (what follows
        it stays for the next read)."""
        deadline = time.monotonic() + TIMEOUT
        data, self.pending = self.pending, b""
        while marker not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                sys.stdout.write(clean(self.seen + data))
                raise SystemExit(f"pty_complete: no answer within {TIMEOUT:.0f} s (waiting for {marker!r})")
            chunk = self.read_some(left)
            data += chunk
        end = data.index(marker) + len(marker)
        self.pending = data[end:]
        return data[:end]

    def read_some(self, timeout):
        """The next output, or b"" when there is none within `timeout` seconds."""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if not data:
            sys.stdout.write(clean(self.seen))
            raise SystemExit("pty_complete: the shell exited")
        if b"\x1b[6n" in data:
            os.write(self.fd, b"\x1b[1;1R")
        self.seen += data
        return data

    def show_typed(self, line):
        """Reads until the terminal shows `line` (its escape sequences removed); returns what it read."""
        deadline = time.monotonic() + TIMEOUT
        data = b""
        while line.rstrip() not in clean(data):
            if time.monotonic() > deadline:
                sys.stdout.write(clean(self.seen + data))
                raise SystemExit(f"pty_complete: the shell did not show the typed line {line!r}")
            data += self.read_some(deadline - time.monotonic())
        return data

    def sync(self):
        """Types a command whose output (not its echo) is a new marker; returns the output before it, and
        reads on to the prompt after it: the shell prints that once its line editor has the terminal (keys
        typed before then are the terminal's own, in cooked mode: echoed, a TAB as a TAB, Ctrl-U as the
        kill character)."""
        self.count += 1
        word = f"mark{self.count}x"
        self.send(f"printf '%s\\n' '{word[:3]}''{word[3:]}'\r")
        out = self.read_until(word.encode() + b"\r\n")
        self.read_until(b"$ ")
        return out


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    shell, script, lines = sys.argv[1], sys.argv[2], sys.argv[3:]
    term = Terminal(command(shell))
    for line in setup_lines(shell, script):
        term.send(line + "\r")
    term.sync()
    for line in lines:
        term.send(line)
        shown = term.show_typed(line)
        term.send("\t")
        shown += term.read_some(10.0)
        # Ctrl-U: empty the line (typed ahead like every other key, so it comes after the completion; a
        # Ctrl-C would not: the terminal turns it into SIGINT at once and discards the typed-ahead keys)
        term.send("\x15")
        out = term.sync()
        print(f"=== {line}")
        print(clean(shown + out))
    term.send("exit\r")
    os.close(term.fd)
    os.waitpid(term.pid, 0)


if __name__ == "__main__":
    main()
