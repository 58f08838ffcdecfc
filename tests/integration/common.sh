# shellcheck shell=bash
# Set-up and helpers shared by the integration suites (tests/integration/test_*.sh source this file).
#
# A suite defines one function per test case and runs each with `run_case "what it checks" function`;
# it ends with `finish`. Each case runs in a subshell with errexit: the first failing command or
# assertion ends that case (reported as "not ok - ..." with the failing line), the others still run.
# A case that cannot run here calls `skip "reason"` (reported as "skipped - ...", never as passed).
#
# Environment (set by tests/CMakeLists.txt and scripts/test):
#   MONGOLOCK_TEST_URI       the test server; unset: the suite is skipped (exit 77), or fails when
#                            MONGOLOCK_REQUIRE_SERVER=1
#   MONGOLOCK_BIN            the mongolock binary (default: build/cli/mongolock of this repository)
#   MONGOLOCK_TEST_TMP       where the suite's temp dir goes (default: $TMPDIR or /tmp)
#   MONGOLOCK_FAULT_RESULTS  a file the fault-injection suites append their measured results to
#
# Every suite gets its own collection (MONGOLOCK_COLLECTION=t_<suite>_<random>, dropped at the end) and
# temp dir ($SUITE_TMP, removed at the end; each case has its own empty $T in it). Every process a suite
# starts is stopped when its case ends: those recorded with `track` and every program that inherited the
# suite's MONGOLOCK_TEST_MARK variable (which also catches mongolock's children and orphaned
# grandchildren).

set -euo pipefail
set -o errtrace
shopt -s inherit_errexit
export LC_ALL=C
exec </dev/null 2>&1 # failure reports (stderr) stay in order with the "ok" lines

ITEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# For commands the suites run inside a job (sh -c '...'): mongo.py, the server seen by another client.
export MONGO_PY=$ITEST_DIR/mongo.py
REPO_ROOT=$(cd "$ITEST_DIR/../.." && pwd)
SUITE=$(basename "${BASH_SOURCE[1]}" .sh)
SUITE=${SUITE#test_}

# --- failure reporting ------------------------------------------------------------------------------

# "file:line" of the first caller outside this file.
where() {
  local i
  for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
    if [[ ${BASH_SOURCE[i]} != "${BASH_SOURCE[0]}" ]]; then
      printf '%s:%s' "${BASH_SOURCE[i]##*/}" "${BASH_LINENO[i - 1]}"
      return
    fi
  done
  printf '%s' "${BASH_SOURCE[0]##*/}"
}

on_error() { # rc file line command
  printf 'FAIL: %s:%s: command failed with exit %s: %s\n' "${2##*/}" "$3" "$1" "$4" >&2
}

# Ends the current test case (or the suite, outside a case) as failed.
fail() {
  printf 'FAIL: %s: %s\n' "$(where)" "$*" >&2
  exit 1
}

# fail_with MESSAGE [LABEL FILE]...: fail, showing files.
fail_with() {
  {
    printf 'FAIL: %s: %s\n' "$(where)" "$1"
    shift
    while (($# >= 2)); do
      show "$1" "$2"
      shift 2
    done
  } >&2
  exit 1
}

# Prints a file indented, for failure messages.
show() { # label file
  printf '  %s:\n' "$1"
  if [[ -s $2 ]]; then sed 's/^/    | /' "$2"; else printf '    (empty)\n'; fi
}

trap 'on_error $? "${BASH_SOURCE[0]}" "$LINENO" "$BASH_COMMAND"' ERR

# --- environment --------------------------------------------------------------------------------------

if [[ -z ${MONGOLOCK_TEST_URI:-} ]]; then
  if [[ ${MONGOLOCK_REQUIRE_SERVER:-} == 1 ]]; then
    echo "FAIL: MONGOLOCK_TEST_URI is not set but MONGOLOCK_REQUIRE_SERVER=1"
    exit 1
  fi
  echo "skipped: MONGOLOCK_TEST_URI is not set (run scripts/test, or scripts/test-server ctest)"
  exit 77
fi
export MONGOLOCK_BIN=${MONGOLOCK_BIN:-$REPO_ROOT/build/cli/mongolock}
[[ -x $MONGOLOCK_BIN ]] || fail "MONGOLOCK_BIN=$MONGOLOCK_BIN is not an executable"

# Settings of the user's environment or config file must not change what the suites see: every
# MONGOLOCK_* variable but the harness's goes, and the config file is an empty one.
for var in $(compgen -e MONGOLOCK_); do
  case $var in
  MONGOLOCK_TEST_URI | MONGOLOCK_BIN | MONGOLOCK_TEST_TMP | MONGOLOCK_REQUIRE_SERVER | MONGOLOCK_FAULT_RESULTS) ;;
  *) unset "$var" ;;
  esac
done
unset var

random_hex() { od -An -N4 -tx4 /dev/urandom | tr -d ' \n'; }

tmp_base=${MONGOLOCK_TEST_TMP:-${TMPDIR:-/tmp}}
mkdir -p "$tmp_base"
SUITE_TMP=$(mktemp -d "$tmp_base/$SUITE.XXXXXX")
PIDS_FILE=$SUITE_TMP/pids
: >"$PIDS_FILE"
export MONGOLOCK_CONFIG=$SUITE_TMP/empty.conf
: >"$MONGOLOCK_CONFIG"
# libmongoc's shared-memory counters off: the suites kill holders with SIGKILL on purpose, which leaves
# /dev/shm/mongoc-<pid> behind, and on a machine with a small pid_max a later process that gets the same
# pid prints a warning the output checks would trip on (mongolock removes its own file when it starts,
# but the harness's python and other clients, and older binaries, may leave files behind).
export MONGOC_DISABLE_SHM=1
T=$SUITE_TMP  # each test case gets its own: $SUITE_TMP/<case number>
OUT=$T/stdout # output of the last expect_exit
ERR=$T/stderr

export MONGOLOCK_URI=$MONGOLOCK_TEST_URI
MONGOLOCK_COLLECTION="t_${SUITE}_$(random_hex)"
MONGOLOCK_TEST_MARK="$SUITE.$$.$(random_hex)"
export MONGOLOCK_COLLECTION MONGOLOCK_TEST_MARK
# shellcheck disable=SC2034 # used by the suites
HOST=$(uname -n) # what gethostname(2) returns: the host part of holder identities

# --- processes ----------------------------------------------------------------------------------------

# Records pids to stop when the case ends (for background shells, which carry no mark).
track() { printf '%s\n' "$@" >>"$PIDS_FILE"; }

# True while process $1 exists and is not a zombie.
pid_alive() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# True while any live process is in process group $1.
group_alive() {
  local f stat fields
  for f in /proc/[0-9]*/stat; do
    { read -r stat <"$f"; } 2>/dev/null || continue
    read -ra fields <<<"${stat##*) }"
    [[ ${fields[0]} != Z && ${fields[2]} == "$1" ]] && return 0
  done
  return 1
}

# Pids of the programs that inherited this suite's mark (grep and sed run without it).
marked_pids() {
  local mark=$MONGOLOCK_TEST_MARK
  (
    unset MONGOLOCK_TEST_MARK
    { grep -lsxzF "MONGOLOCK_TEST_MARK=$mark" /proc/[0-9]*/environ || true; } | sed 's#^/proc/\([0-9]*\)/environ$#\1#'
  )
}

# Stops every process of the suite but the suite's own shells: SIGTERM, up to 5 s to go, then SIGKILL.
stop_processes() {
  local pids=() pid i
  mapfile -t pids < <(cat "$PIDS_FILE" 2>/dev/null; marked_pids)
  : >"$PIDS_FILE"
  ((${#pids[@]})) || return 0
  for pid in "${pids[@]}"; do
    [[ $pid != "$$" ]] && kill -TERM "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 50; i++)); do
    local alive=0
    for pid in "${pids[@]}"; do
      [[ $pid != "$$" ]] && pid_alive "$pid" && alive=1
    done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${pids[@]}" $(marked_pids); do
    [[ $pid != "$$" ]] && kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}

# proxy COMMAND...: one command to the fault proxy whose control FIFOs are in $PROXY_CTL (faultproxy.py of
# faults.sh, failproxy.py of failproxy.sh or test_failover.sh); returns once it has been applied. Shell
# builtins only, so that it takes well under a millisecond. On failure shows $PROXY_LOG ($T/proxy.log
# unless the proxy's starter set it).
proxy() {
  local fin fout reply=
  exec {fin}>"$PROXY_CTL/in" {fout}<"$PROXY_CTL/out"
  printf '%s\n' "$*" >&"$fin"
  read -r -t 10 reply <&"$fout" || true
  exec {fin}>&- {fout}<&-
  [[ $reply == ok* ]] || fail_with "proxy $*: ${reply:-no answer}" log "${PROXY_LOG:-$T/proxy.log}"
}

cleanup_suite() {
  trap - ERR
  stop_processes
  python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true
  rm -rf "$SUITE_TMP"
}
trap cleanup_suite EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

# --- test cases ---------------------------------------------------------------------------------------

CASES_PASSED=0
CASES_FAILED=0
CASES_SKIPPED=0
CASE_NUMBER=0

# Ends the current test case as skipped: it cannot run here (say why).
skip() {
  printf '%s\n' "$*" >"$T/skipped"
  exit 77
}

# run_case DESCRIPTION FUNCTION [ARGS...]: runs one test case in a subshell; prints "ok - DESCRIPTION"
# or "not ok - DESCRIPTION" after the reasons; stops what the case left running.
run_case() {
  local description=$1 rc=0
  shift
  CASE_NUMBER=$((CASE_NUMBER + 1))
  trap - ERR
  set +e
  (
    set -e
    trap 'on_error $? "${BASH_SOURCE[0]}" "$LINENO" "$BASH_COMMAND"' ERR
    T=$SUITE_TMP/$CASE_NUMBER
    OUT=$T/stdout
    ERR=$T/stderr
    mkdir "$T"
    "$@"
  )
  rc=$?
  set -e
  trap 'on_error $? "${BASH_SOURCE[0]}" "$LINENO" "$BASH_COMMAND"' ERR
  stop_processes
  if ((rc == 0)); then
    printf 'ok - %s\n' "$description"
    CASES_PASSED=$((CASES_PASSED + 1))
  elif ((rc == 77)) && [[ -e $SUITE_TMP/$CASE_NUMBER/skipped ]]; then
    printf 'skipped - %s: %s\n' "$description" "$(cat "$SUITE_TMP/$CASE_NUMBER/skipped")"
    CASES_SKIPPED=$((CASES_SKIPPED + 1))
  else
    printf 'not ok - %s\n' "$description"
    CASES_FAILED=$((CASES_FAILED + 1))
  fi
}

# Prints the suite's summary line and exits: 0 when every case passed or was skipped and one passed,
# 77 (skipped) when every case was skipped, 1 otherwise.
finish() {
  if ((CASES_SKIPPED)); then
    printf '%d passed, %d failed, %d skipped\n' "$CASES_PASSED" "$CASES_FAILED" "$CASES_SKIPPED"
  else
    printf '%d passed, %d failed\n' "$CASES_PASSED" "$CASES_FAILED"
  fi
  if ((CASES_FAILED == 0 && CASES_PASSED > 0)); then exit 0; fi
  if ((CASES_FAILED == 0 && CASES_SKIPPED > 0)); then exit 77; fi
  exit 1
}

# A lock name unique to this test case: lock_name [WORD].
lock_name() { printf '%s-%s-%s\n' "${1:-lock}" "$CASE_NUMBER" "$(random_hex)"; }

# --- running mongolock ----------------------------------------------------------------------------------

ml() { "$MONGOLOCK_BIN" "$@"; }

# expect_exit CODE [--] CMD [ARGS...]: runs CMD with stdout in $OUT and stderr in $ERR; fails the case,
# showing both, unless it exits with CODE.
expect_exit() {
  local want=$1 got=0
  shift
  [[ ${1:-} == -- ]] && shift
  "$@" >"$OUT" 2>"$ERR" || got=$?
  [[ $got == "$want" ]] ||
    fail_with "expected exit $want, got $got from:$(printf ' %q' "$@")" stdout "$OUT" stderr "$ERR"
}

# start_bg LABEL CMD [ARGS...]: starts an external command in the background with stdout/stderr in
# $T/LABEL.out and $T/LABEL.err and sets BG_PID to its pid (`ml` stands for the mongolock binary).
# SIGINT and SIGQUIT get their default action back (a non-interactive bash ignores them in background
# jobs), as for a job started from a terminal or cron.
start_bg() {
  local label=$1
  shift
  [[ $1 == ml ]] && set -- "$MONGOLOCK_BIN" "${@:2}"
  env --default-signal=INT,QUIT "$@" >"$T/$label.out" 2>"$T/$label.err" &
  BG_PID=$!
  track "$BG_PID"
}

# wait_bg PID LABEL [TIMEOUT_S]: waits (30 s unless told) for a background command started with
# start_bg LABEL to end and sets BG_STATUS to its exit status.
wait_bg() {
  local pid=$1 label=$2 timeout=${3:-30}
  { wait_for "$timeout" eval "! pid_alive $pid"; } 2>/dev/null || # (bash would report "Killed" etc.)
    fail_with "$label (pid $pid) still runs after $timeout s" stdout "$T/$label.out" stderr "$T/$label.err"
  BG_STATUS=0
  wait "$pid" 2>/dev/null || BG_STATUS=$?
}

# expect_bg_exit CODE PID LABEL [TIMEOUT_S]: wait_bg, then fails unless it exited with CODE.
expect_bg_exit() {
  local want=$1
  wait_bg "$2" "$3" "${4:-30}"
  [[ $BG_STATUS == "$want" ]] ||
    fail_with "expected $3 to exit $want, got $BG_STATUS" stdout "$T/$3.out" stderr "$T/$3.err"
}

# --- waiting --------------------------------------------------------------------------------------------

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# wait_for TIMEOUT_S CMD [ARGS...]: polls CMD every 0.1 s until it succeeds (0) or TIMEOUT_S passed (1).
wait_for() {
  local deadline=$(($(now_ms) + $1 * 1000))
  shift
  until "$@"; do
    (($(now_ms) < deadline)) || return 1
    sleep 0.1
  done
}

# wait_until TIMEOUT_S CMD [ARGS...]: wait_for, failing the case on timeout.
wait_until() {
  wait_for "$@" || fail "timed out after $1 s waiting for:$(printf ' %q' "${@:2}")"
}

# --- assertions -----------------------------------------------------------------------------------------

assert_contains() { # FILE TEXT
  grep -qF -- "$2" "$1" || fail_with "${1##*/} does not contain '$2'" "${1##*/}" "$1"
}

assert_not_contains() { # FILE TEXT
  ! grep -qF -- "$2" "$1" || fail_with "${1##*/} contains '$2'" "${1##*/}" "$1"
}

assert_matches() { # FILE EXTENDED-REGEX: some line matches
  grep -qE -- "$2" "$1" || fail_with "no line of ${1##*/} matches /$2/" "${1##*/}" "$1"
}

assert_not_matches() { # FILE EXTENDED-REGEX: no line matches
  ! grep -qE -- "$2" "$1" || fail_with "a line of ${1##*/} matches /$2/: $(grep -m1 -E -- "$2" "$1")" "${1##*/}" "$1"
}

assert_empty() { # FILE
  [[ ! -s $1 ]] || fail_with "${1##*/} is not empty" "${1##*/}" "$1"
}

assert_eq() { # ACTUAL EXPECTED [WHAT]
  [[ $1 == "$2" ]] || fail "${3:-value}: expected '$2', got '$1'"
}

# The one "server commands:" line of FILE (MONGOLOCK_DEBUG_COMMANDS=1) with the commands mongolock sent again
# after the server refused them without writing ("; resent: insert 1": FerretDB SQLite's "database is locked"
# on a wake-up event while a waiter's cursor reads the events) taken out: "N (name n, ...)", what the protocol
# sent. Anything else (no such line, two of them) is printed as it is, so that the comparison fails.
commands_sent() { # FILE
  python3 - "$1" <<'PY'
import re, sys
lines = [l.strip() for l in open(sys.argv[1]) if "server commands: " in l]
m = re.search(r"server commands: (\d+) \(([^;)]*)(?:; resent: ([^)]*))?\)$", lines[0]) if len(lines) == 1 else None
if not m:
    print(f"{len(lines)} 'server commands' lines: {lines}")
    sys.exit(0)
def parse(text):
    return {k: int(v) for k, v in (p.rsplit(" ", 1) for p in (text or "").split(", ") if p)}
sent, resent = parse(m.group(2)), parse(m.group(3))
if sum(sent.values()) != int(m.group(1)) or any(sent.get(k, 0) < v for k, v in resent.items()):
    print(f"inconsistent: {lines[0]}")
    sys.exit(0)
for k, v in resent.items():
    sent[k] -= v
print(f"{sum(sent.values())} ({', '.join(f'{k} {v}' for k, v in sorted(sent.items()) if v)})")
PY
}

assert_commands() { # FILE EXPECTED: commands_sent FILE is EXPECTED ("3 (endSessions 1, findAndModify 1, insert 1)")
  assert_eq "$(commands_sent "$1")" "$2" "server commands in ${1##*/} ($(grep -m1 -o 'server commands: .*' "$1"))"
}

# The stderr of the last expect_exit is exactly one line "mongolock: error: ..." containing TEXT.
assert_error_line() { # TEXT
  local lines
  lines=$(wc -l <"$ERR")
  [[ $lines == 1 ]] && grep -q '^mongolock: error: ' "$ERR" && grep -qF -- "$1" "$ERR" ||
    fail_with "expected one line 'mongolock: error: ...$1...' on stderr" stderr "$ERR"
}

# --- lock state -----------------------------------------------------------------------------------------

# The value of "KEY: value" in a `mongolock status` output file.
status_field() { sed -n "s/^$2: //p" "$1"; }

# Milliseconds of a duration as mongolock prints it ("850ms", "2.5s", "4m05s", "1h02m", "3d04h").
dur_ms() {
  local s=$1 total=0 n frac
  while [[ $s =~ ^([0-9]+)(\.([0-9]+))?(ms|s|m|h|d)(.*)$ ]]; do
    n=$((10#${BASH_REMATCH[1]}))
    frac=${BASH_REMATCH[3]:-0}
    case ${BASH_REMATCH[4]} in
    ms) total=$((total + n)) ;;
    s) total=$((total + n * 1000 + 10#${frac:0:1} * 100)) ;;
    m) total=$((total + n * 60000)) ;;
    h) total=$((total + n * 3600000)) ;;
    d) total=$((total + n * 86400000)) ;;
    esac
    s=${BASH_REMATCH[5]}
  done
  [[ -z $s && $1 != "" ]] || fail "cannot read duration '$1'"
  echo "$total"
}

# Milliseconds until the lock in a status output file expires (negative: expired that long ago).
status_left_ms() {
  local expires
  expires=$(status_field "$1" expires)
  if [[ $expires =~ \(in\ ([^\)]+)\)$ ]]; then
    dur_ms "${BASH_REMATCH[1]}"
  elif [[ $expires =~ \(([^\)]+)\ ago\)$ ]]; then
    echo "-$(dur_ms "${BASH_REMATCH[1]}")"
  else
    fail "no 'expires: ... (in X)' in status output: $(cat "$1")"
  fi
}

# Succeeds when NAME is held (status exit 0).
is_held() { ml status "$1" >/dev/null 2>&1; }
is_free() {
  local rc=0
  ml status "$1" >/dev/null 2>&1 || rc=$?
  ((rc == 1))
}

# The status of NAME must be "held" by HOLDER (exit 0).
assert_held_by() { # NAME HOLDER
  expect_exit 0 -- ml status "$1"
  assert_contains "$OUT" "state: held"
  assert_eq "$(status_field "$OUT" holder)" "$2" "holder of '$1'"
}

# The status of NAME must be "free" (exit 1) and no document of NAME may be left.
assert_free() { # NAME
  expect_exit 1 -- ml status "$1"
  assert_contains "$OUT" "state: free"
  local rc=0
  python3 "$ITEST_DIR/mongo.py" doc "$1" >"$T/doc" || rc=$?
  case $rc in
  0) fail "lock '$1' is free but its document is still stored: $(tr '\n' ' ' <"$T/doc")" ;;
  1) ;;
  *) fail "cannot read the lock documents (mongo.py exited $rc)" ;;
  esac
}

# The stored lock document of NAME as key=value lines in $T/doc; fails when there is none.
read_doc() {
  python3 "$ITEST_DIR/mongo.py" doc "$1" >"$T/doc" || fail "no lock document for '$1'"
}
doc_field() { sed -n "s/^$1=//p" "$T/doc"; }

# json FILE PYTHON-EXPRESSION: prints the expression evaluated with d = the JSON document in FILE (lists,
# objects, booleans and null as JSON; strings and numbers as they are).
json() {
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); v = eval(sys.argv[2]); print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)' "$1" "$2" ||
    fail_with "cannot evaluate $2 on the JSON" json "$1"
}

# Number of lock documents in the suite's collection.
doc_count() { python3 "$ITEST_DIR/mongo.py" count; }

# The server's clock, epoch milliseconds.
server_now_ms() { python3 "$ITEST_DIR/mongo.py" now; }

# Waits until file $2 exists, $1 seconds at most.
wait_file() { wait_until "$1" test -e "$2"; }

printf '# suite %s: collection %s, binary %s\n' "$SUITE" "$MONGOLOCK_COLLECTION" "$MONGOLOCK_BIN"
