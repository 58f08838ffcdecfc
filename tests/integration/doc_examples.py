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

    doc_examples.py facts MONGOLOCK README MANPAGE EXAMPLES_DIR STATUS_JSON HISTORY_JSON DOCTOR_TXT
        What issue 29 found untrue, checked against the binary and its output (the files: what
        `status --json`, `history --json` and `doctor` printed for a run with skipped attempts):
        SYNOPSIS names every option each command's --help lists; the man page's status --json example
        has the fields the binary prints (nested objects too); its history --json summary lists the
        summary's fields; its doctor paragraph names doctor's lines in their order; one URI file path
        (/etc/mongolock/uri) everywhere; one fencing rule (a stored fence <= the token is accepted);
        the README's first crontab is one to paste (a URI file, -q, mongolock by its full path);
        --help names $XDG_CONFIG_HOME and check's exit codes. One line per problem; exit 1 if any.
"""
import json
import os
import re
import subprocess
import sys

SUBCOMMANDS = ["acquire", "release", "renew", "run", "status", "list", "history", "break", "doctor", "init",
               "completion"]
# Variables that are not options: what run exports to the job, the scripts' own, and CMake's options.
NOT_OPTIONS = {"MONGOLOCK_NAME", "MONGOLOCK_TOKEN", "MONGOLOCK_PROCESS", "MONGOLOCK_FENCE", "MONGOLOCK_SLOT",
               "MONGOLOCK_TEST_URI", "MONGOLOCK_TEST_BACKEND", "MONGOLOCK_BUILD_DIR", "MONGOLOCK_CACHE_DIR",
               "MONGOLOCK_REQUIRE_SERVER", "MONGOLOCK_FAULT_RESULTS", "MONGOLOCK_MAINTAINER",
               "MONGOLOCK_SANITIZE", "MONGOLOCK_WERROR", "MONGOLOCK_DEBUG_COMMANDS", "MONGOLOCK_TEST_TMP",
               "MONGOLOCK_BIN", "MONGOLOCK_STATIC_DRIVER"}


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


def synopsis_problems(binary, man):
    problems = []
    synopsis = man.split(".SH SYNOPSIS", 1)[1].split(".SH ", 1)[0]
    global_opts = long_options(help_of(binary))
    for sub in SUBCOMMANDS:
        for opt in sorted(long_options(help_of(binary, sub)) - global_opts - {"--help", "-h"}):
            if not re.search(re.escape(opt) + r"(?![a-z-])", synopsis):
                problems.append(f"SYNOPSIS lacks {opt} of {sub}")
    return problems


def man_json_example(man, command):
    """The JSON object printed after `$ mongolock COMMAND ... --json` in the man page."""
    m = re.search(r"\$ mongolock " + command + r" [^\n]*--json\n(\{.*?\n\})\n", man, re.S)
    return json.loads(m.group(1)) if m else None


def shape_problems(example, actual, where):
    """Fields of `actual` missing from `example` and the other way round, recursively (first elements)."""
    problems = []
    if isinstance(actual, dict) and isinstance(example, dict):
        for key in actual.keys() - example.keys():
            problems.append(f"{where}: the example lacks '{key}', which the binary prints")
        for key in example.keys() - actual.keys():
            problems.append(f"{where}: the example has '{key}', which the binary does not print")
        for key in actual.keys() & example.keys():
            problems += shape_problems(example[key], actual[key], f"{where}.{key}")
    elif isinstance(actual, list) and isinstance(example, list) and actual and example:
        problems += shape_problems(example[0], actual[0], f"{where}[0]")
    return problems


def json_problems(man, status_json, history_json):
    problems = []
    example = man_json_example(man, "status")
    if example is None:
        problems.append("no status --json example in the man page")
    else:
        problems += shape_problems(example, json.load(open(status_json)), "man: status --json")
    summary = json.load(open(history_json))["summary"]
    text = re.sub(r"\s+", " ", man.split("history --json prints an object", 1)[1].split(".PP", 1)[0])
    listed = re.search(r"the summary with (.*?) \(integers, null", text)
    fields = set(re.findall(r"[a-z_]+", listed.group(1))) - {"and", "integers"} if listed else set()
    for key in sorted(summary.keys() - fields):
        problems.append(f"man: the history --json summary's field list lacks '{key}'")
    return problems


def doctor_problems(man, doctor_txt):
    labels = [line.split(":", 1)[0] for line in open(doctor_txt).read().splitlines() if ":" in line]
    text = re.sub(r"\s+", " ", man.split("\ndoctor\nCheck the set-up", 1)[1].split(".TP", 1)[0])
    positions = [text.find(label) for label in labels]
    if -1 in positions:
        return [f"man: doctor does not name the line '{labels[positions.index(-1)]}'"]
    if positions != sorted(positions):
        return [f"man: doctor names its lines in another order than it prints them: {labels}"]
    return []


def crontab_problems(readme):
    m = re.search(r"```crontab\n(.*?)```", readme, re.S)
    first = m.group(1) if m else ""
    problems = []
    if not re.search(r"MONGOLOCK_URI_FILE=|--uri-file|--config", first):
        problems.append("README: the first crontab gives no URI file (under cron it dials localhost)")
    if not re.search(r"mongolock\s+(-[-a-zA-Z]+\s+)*-q\b", first):
        problems.append("README: the first crontab has no -q (every host that skips mails)")
    if re.search(r"(^|\s)mongolock\s", first, re.M):
        problems.append("README: the first crontab calls mongolock without its path (cron's PATH is /usr/bin:/bin)")
    return problems


def exit_code_problems(man, readme, help_text):
    """Every exit code of lib/mongolock/exit_codes.hpp (the one header) is in the man page's EXIT STATUS,
    the README's exit table and --help (issue 27: 66 was added)."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../lib/mongolock/exit_codes.hpp")
    codes = sorted({int(c) for c in re.findall(r"k_exit_\w+ = (\d+),", open(header, encoding="utf-8").read())})
    if not codes:
        return [f"{header}: no exit codes found"]
    status = man.split(".SH EXIT STATUS", 1)[-1].split(".SH ", 1)[0]
    problems = []
    for code in codes:
        if not re.search(rf"^\.TP[^\n]*\n{code}\n", status, re.M):
            problems.append(f"man page: EXIT STATUS lacks {code} (lib/mongolock/exit_codes.hpp)")
        if not re.search(rf"^\| {code} \|", readme, re.M):
            problems.append(f"README: the exit table lacks {code} (lib/mongolock/exit_codes.hpp)")
        if not re.search(rf"\b{code} ", help_text.split("Exit codes:", 1)[-1]):
            problems.append(f"--help: the exit codes lack {code} (lib/mongolock/exit_codes.hpp)")
    return problems


def facts(binary, readme_path, manpage, examples_dir, status_json, history_json, doctor_txt):
    import glob
    man = plain_man(open(manpage, encoding="utf-8").read())
    readme = open(readme_path, encoding="utf-8").read()
    problems = synopsis_problems(binary, man) + json_problems(man, status_json, history_json)
    problems += doctor_problems(man, doctor_txt) + crontab_problems(readme)
    texts = {readme_path: readme, manpage: man}
    for path in glob.glob(examples_dir + "/*"):
        texts[path] = open(path, encoding="utf-8").read()
    for path, text in texts.items():
        if "/etc/mongolock.uri" in text:
            problems.append(f"{path}: the URI file is /etc/mongolock/uri, not /etc/mongolock.uri")
        for m in re.finditer(r"fence\s*<\s*\$", text):
            problems.append(f"{path}: '{m.group(0)}' refuses the holder's own token again; write 'fence <= $...'")
        for m in re.finditer(r"\$fence\W+-le\W|-ge \"\$fence\"", text):
            problems.append(f"{path}: '{m.group(0)}' refuses an equal token")
    help_text = help_of(binary)
    if "$XDG_CONFIG_HOME" not in help_text:
        problems.append("--help: the --config search does not name $XDG_CONFIG_HOME")
    if not re.search(r"0-3 check", help_text) or "128+N" not in help_text:
        problems.append("--help: the exit codes lack check's 0-3 or 128+N")
    problems += exit_code_problems(man, readme, help_text)
    for p in problems:
        print(p)
    return 1 if problems else 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "options":
        return check_options(*sys.argv[2:])
    if len(sys.argv) == 9 and sys.argv[1] == "facts":
        return facts(*sys.argv[2:])
    if len(sys.argv) == 4 and sys.argv[1] == "block":
        return block(sys.argv[2], sys.argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
