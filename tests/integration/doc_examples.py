#!/usr/bin/env python3
"""Checks the README's and the man page's examples against the binary.

    doc_examples.py options MONGOLOCK README MANPAGE
        Every option in an example command line (`mongolock SUB ... --opt`, also continued with a
        backslash) must be one that `mongolock SUB --help` or `mongolock --help` lists, and every
        MONGOLOCK_* variable the documents name must be known: an option's variable (the help's
        "Env:" notes), one the man page's ENVIRONMENT section describes, one run exports to its job,
        or a build/test variable of the scripts. Every option variable must be in ENVIRONMENT.
        Prints one line per problem and exits 1 when there is any.

    doc_examples.py block README TEXT
        Prints the first ```sh block of README that contains TEXT (to run it).
"""
import re
import subprocess
import sys

SUBCOMMANDS = ["acquire", "release", "renew", "run", "status", "list", "history", "break", "doctor", "init",
               "completion"]
# Variables that are not options: what run exports to the job, and the scripts' own.
NOT_OPTIONS = {"MONGOLOCK_NAME", "MONGOLOCK_TOKEN", "MONGOLOCK_PROCESS", "MONGOLOCK_FENCE", "MONGOLOCK_SLOT",
               "MONGOLOCK_TEST_URI", "MONGOLOCK_TEST_BACKEND", "MONGOLOCK_BUILD_DIR", "MONGOLOCK_CACHE_DIR",
               "MONGOLOCK_REQUIRE_SERVER", "MONGOLOCK_FAULT_RESULTS", "MONGOLOCK_MAINTAINER",
               "MONGOLOCK_SANITIZE", "MONGOLOCK_WERROR", "MONGOLOCK_DEBUG_COMMANDS", "MONGOLOCK_TEST_TMP",
               "MONGOLOCK_BIN"}


def plain_man(text):
    """The man page source as plain text, enough for option and variable names."""
    text = re.sub(r"\\f[BIRP]", "", text)
    text = text.replace("\\-", "-").replace("\\e", "\\").replace("\\(aq", "'").replace("\\&", "")
    return text


def help_of(binary, *args):
    return subprocess.run([binary, *args, "--help"], capture_output=True, text=True, check=False).stdout


def long_options(help_text):
    return set(re.findall(r"(?:^|[ ,])(--[a-z][a-z0-9-]*)", help_text, re.M)) | set(
        re.findall(r"(?:^|\s)(-[a-zA-Z]),", help_text, re.M))


def command_lines(text):
    """Each `mongolock SUB ...` command line of the text, continuation lines joined."""
    lines = text.splitlines()
    joined, buf = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        joined.append(buf + line)
        buf = ""
    for line in joined:
        for m in re.finditer(r"\bmongolock\s+((?:-[-a-zA-Z0-9=.\"'/]+\s+(?:\S+\s+)?)*)(%s)\b([^|;&)`#]*)"
                             % "|".join(SUBCOMMANDS), line):
            rest = m.group(3).split(" -- ")[0]
            yield line.strip(), m.group(2), m.group(1), rest


def check_options(binary, readme, manpage):
    problems = []
    global_help = help_of(binary)
    global_opts = long_options(global_help)
    helps = {sub: help_of(binary, sub) for sub in SUBCOMMANDS}
    envs = set(re.findall(r"Env:(MONGOLOCK_[A-Z_]+)", global_help))
    for text in helps.values():
        envs |= set(re.findall(r"Env:(MONGOLOCK_[A-Z_]+)", text))
    man = plain_man(open(manpage, encoding="utf-8").read())
    environment = man.split(".SH ENVIRONMENT", 1)[1].split(".SH ", 1)[0] if ".SH ENVIRONMENT" in man else ""
    described = set(re.findall(r"MONGOLOCK_[A-Z_]+", environment))
    docs = {readme: open(readme, encoding="utf-8").read(), manpage: man}
    for path, text in docs.items():
        for line, sub, before, rest in command_lines(text):
            allowed = long_options(helps[sub]) | global_opts
            for opt in re.findall(r"(?:^|\s)(--[a-z][a-z0-9-]*|-[a-zA-Z])(?==|\s|$)", before + " " + rest):
                if opt not in allowed:
                    problems.append(f"{path}: '{opt}' is not an option of 'mongolock {sub}': {line[:120]}")
        for var in sorted(set(re.findall(r"MONGOLOCK_[A-Z_]*[A-Z]", text))):
            if var not in envs and var not in described and var not in NOT_OPTIONS:
                problems.append(f"{path}: {var} is neither an option's variable nor described in ENVIRONMENT")
    for var in sorted(envs - described):
        problems.append(f"{manpage}: ENVIRONMENT does not describe {var} (an option's variable)")
    for p in problems:
        print(p)
    return 1 if problems else 0


def block(readme, needle):
    text = open(readme, encoding="utf-8").read()
    for m in re.finditer(r"```sh\n(.*?)```", text, re.S):
        if needle in m.group(1):
            sys.stdout.write(m.group(1))
            return 0
    print(f"no ```sh block with '{needle}' in {readme}", file=sys.stderr)
    return 1


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "options":
        return check_options(*sys.argv[2:])
    if len(sys.argv) == 4 and sys.argv[1] == "block":
        return block(sys.argv[2], sys.argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
