# shellcheck shell=bash
# Harness of the fault-injection suites (test_faults_*.sh source common.sh, then this file).
#
# Each case starts its own FerretDB (server_start: the command line of scripts/test-server, on
# 127.0.0.1, a free port, its data in $T/db) so that it can kill it and start it again on the same
# port and data; common.sh stops it with everything else the case started. A holder is a
# `mongolock -v run` in its own session and process group (so that a test can stop mongolock's group
# and the job's group separately) whose job is `holders.py job`; a contender is the same from another
# host: its own UTS namespace with hostname host-b (needs root; without it the case is skipped).
# Every job appends its start, ticks and end to $HOLDERS; check_holders proves that no two holders'
# intervals overlapped.
#
# Results (overlap, exit codes, times) are printed as "# result: ..." lines and, when
# MONGOLOCK_FAULT_RESULTS names a file, appended to it.

FERRETDB_BIN=$(prog=faults && source "$REPO_ROOT/scripts/lib.sh" && ferretdb_path)
[[ -x $FERRETDB_BIN ]] || fail "no FerretDB at $FERRETDB_BIN: run scripts/setup"
HOLDERS_PY=$ITEST_DIR/holders.py
PROXY_PY=$ITEST_DIR/faultproxy.py
CONTENDER_HOST=host-b

# --- the server -------------------------------------------------------------------------------------

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# True when the server answers a hello.
server_answers() { MONGOLOCK_URI=$SERVER_URI python3 "$ITEST_DIR/mongo.py" now >/dev/null 2>&1; }

# server_start: starts FerretDB (again: same port and data) and waits until it answers; sets
# SERVER_PID, SERVER_PORT, SERVER_URI (and MONGOLOCK_URI to it), HOLDERS, and SERVER_UP_MS (when it
# answered, now_ms).
server_start() {
  if [[ -z ${SERVER_PORT:-} ]]; then
    SERVER_PORT=$(free_port)
    SERVER_URI=mongodb://127.0.0.1:$SERVER_PORT/
    export MONGOLOCK_URI=$SERVER_URI
    HOLDERS=$T/holders
    mkdir -p "$T/db"
  fi
  "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$T/db/" \
    --listen-addr="127.0.0.1:$SERVER_PORT" --telemetry=disable --debug-addr=- \
    --state-dir="$T/db" --log-level=warn >>"$T/server.log" 2>&1 &
  SERVER_PID=$!
  track "$SERVER_PID"
  disown "$SERVER_PID" # no "Killed" notice from bash when server_kill kills it
  local i
  for ((i = 0; i < 1500; i++)); do
    if server_answers; then
      SERVER_UP_MS=$(now_ms)
      return 0
    fi
    pid_alive "$SERVER_PID" || fail_with "FerretDB exited at startup" log "$T/server.log"
    sleep 0.01
  done
  fail_with "FerretDB did not answer on 127.0.0.1:$SERVER_PORT within 15 s" log "$T/server.log"
}

# The server crashes: SIGKILL, no goodbye to its clients. Sets SERVER_DOWN_MS.
server_kill() {
  kill -KILL "$SERVER_PID"
  SERVER_DOWN_MS=$(now_ms)
  wait_until 5 eval '! pid_alive "$SERVER_PID"'
}

# --- the proxy ------------------------------------------------------------------------------------

# proxy_start: a faultproxy.py between clients and the server; sets PROXY_URI.
proxy_start() {
  PROXY_CTL=$T/proxy
  mkdir "$PROXY_CTL"
  python3 "$PROXY_PY" serve "$T/proxy.port" "$SERVER_PORT" "$PROXY_CTL" 2>"$T/proxy.log" &
  track $!
  wait_until 10 test -s "$T/proxy.port"
  PROXY_URI=mongodb://127.0.0.1:$(cat "$T/proxy.port")/
}

# `proxy MODE [ARG]` (common.sh) switches it: pass, hold, delay MS, refuse, reset.

# --- holders --------------------------------------------------------------------------------------

# Skips the case unless contenders can run as another host (their own UTS namespace: root).
need_other_host() {
  unshare --uts true 2>/dev/null ||
    skip "contenders must run as another host (unshare --uts), which needs root"
}

# start_holder LABEL URI NAME JOB_SECONDS [RUN OPTIONS...]: `mongolock -v --uri URI run NAME OPTIONS --
# holders.py job` in a session and process group of its own; sets HOLDER_PID (also its group).
# $JOB_OPTIONS go to holders.py job (--ignore-term).
start_holder() {
  local label=$1 uri=$2 name=$3 seconds=$4
  shift 4
  # shellcheck disable=SC2086 # word splitting wanted
  start_bg "$label" setsid "$MONGOLOCK_BIN" -v --uri "$uri" run "$name" "$@" -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$seconds" ${JOB_OPTIONS:-}
  HOLDER_PID=$BG_PID
  # Notes when it exits (epoch ms in $T/LABEL.exit_ms), also while the test sleeps or waits for another.
  : >"$T/$label.watch"
  (while pid_alive "$HOLDER_PID"; do sleep 0.01; done && now_ms >"$T/$label.exit_ms.tmp" &&
    mv "$T/$label.exit_ms.tmp" "$T/$label.exit_ms") &
  track $!
}

# start_contender LABEL NAME JOB_SECONDS [RUN OPTIONS...]: as start_holder, from host-b, straight to
# the server, waiting up to 60 s for the lock, with a takeover grace of 500ms (not 2s: it takes over
# sooner after the old lease has ended, which makes the overlap checks stricter and the cases shorter);
# sets CONTENDER_PID.
start_contender() {
  local label=$1 name=$2 seconds=$3
  shift 3
  start_bg "$label" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$CONTENDER_HOST" \
    "$MONGOLOCK_BIN" -v --grace 500ms --uri "$SERVER_URI" run "$name" --wait 60s "$@" -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$seconds"
  CONTENDER_PID=$BG_PID
}

# The pid of the job of a holder from HOST (its first one), once it has started.
job_pid() { awk -v h="$1" '$1 == "start" && $2 == h { print $3; exit }' "$HOLDERS" 2>/dev/null; }
job_started() { [[ -n $(job_pid "$1") ]]; }

# Process group of process $1.
pgid_of() {
  local stat fields
  read -r stat <"/proc/$1/stat"
  read -ra fields <<<"${stat##*) }"
  echo "${fields[2]}"
}

# Number of renewals in a holder's -v log.
renewals() { grep -c "^mongolock: .*lease on '.*' renewed until" "$T/$1.err" || true; }

# wait_renewals LABEL N [TIMEOUT_S]: waits until holder LABEL has renewed N times; sets RENEWED_MS.
wait_renewals() {
  local deadline=$(($(now_ms) + ${3:-30} * 1000))
  until (($(renewals "$1") >= $2)); do
    (($(now_ms) < deadline)) || fail_with "$1 did not renew $2 time(s)" stderr "$T/$1.err"
    sleep 0.02
  done
  RENEWED_MS=$(now_ms)
}

# wait_acquired LABEL: waits until holder LABEL has the lock; sets ACQUIRED_MS.
wait_acquired() {
  local deadline=$(($(now_ms) + 30000))
  until grep -q "^mongolock: .*acquired lock '.*' as .* until" "$T/$1.err"; do
    (($(now_ms) < deadline)) || fail_with "$1 did not acquire its lock" stderr "$T/$1.err"
    sleep 0.02
  done
  ACQUIRED_MS=$(now_ms)
}

# Epoch ms at which the lease of holder LABEL ends, by its last acquisition or renewal on record (the
# server's clock, which is this host's: FerretDB runs here).
lease_end_ms() {
  local iso
  iso=$(sed -n "s/^mongolock: .*\(acquired lock '.*' as .*\|lease on '.*' renewed\) until \([0-9TZ:.-]*\)$/\2/p" \
    "$T/$1.err" | tail -n 1)
  [[ -n $iso ]] || fail_with "no lease end in the log of $1" stderr "$T/$1.err"
  date -d "$iso" +%s%3N
}

# Epoch ms (job_last_us: µs) of the last line the jobs of HOST wrote (when such a job was last seen
# running).
job_last_us() {
  local ns
  ns=$(python3 "$HOLDERS_PY" last "$HOLDERS" "$1") || fail "no job of $1 ran"
  echo $((ns / 1000))
}
job_last_ms() {
  local us
  us=$(job_last_us "$1")
  echo $((us / 1000))
}

now_us() { echo "${EPOCHREALTIME/./}"; }

# Microseconds as milliseconds with one decimal: ms_of_us 1234 → 1.2.
ms_of_us() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# wait_exit PID LABEL [TIMEOUT_S]: as wait_bg, polling every 20 ms; sets BG_STATUS and EXIT_MS (for a
# holder: when it exited, even if that was before this was called).
wait_exit() {
  local deadline=$(($(now_ms) + ${3:-30} * 1000))
  while pid_alive "$1"; do
    (($(now_ms) < deadline)) ||
      fail_with "$2 (pid $1) still runs after ${3:-30} s" stdout "$T/$2.out" stderr "$T/$2.err"
    sleep 0.02
  done
  EXIT_MS=$(now_ms)
  if [[ -e $T/$2.watch ]]; then
    wait_until 2 test -e "$T/$2.exit_ms"
    EXIT_MS=$(cat "$T/$2.exit_ms")
  fi
  BG_STATUS=0
  wait "$1" 2>/dev/null || BG_STATUS=$?
}

# expect_exit_code CODE PID LABEL [TIMEOUT_S]: wait_exit, then fails unless it exited with CODE.
expect_exit_code() {
  wait_exit "$2" "$3" "${4:-30}"
  [[ $BG_STATUS == "$1" ]] ||
    fail_with "expected $3 to exit $1, got $BG_STATUS" stdout "$T/$3.out" stderr "$T/$3.err" \
      holders "$T/holders.summary"
}

# check_holders [MAX_OVERLAP_MS [MIN_HOLDERS [GAP_MS]]]: no two holders ran at once (or for at most
# MAX_OVERLAP_MS, default 0), and at least MIN_HOLDERS (default 2) ran; with GAP_MS, only the stretches
# a holder ran in count (holders.py check --gap-ms). Sets OVERLAP_MS and INSIDE (lines a job wrote
# inside another holder's interval).
check_holders() {
  local rc=0
  python3 "$HOLDERS_PY" check "$HOLDERS" --max-overlap-ms "${1:-0}" --min-holders "${2:-2}" \
    ${3:+--gap-ms "$3"} >"$T/holders.summary" 2>&1 || rc=$?
  OVERLAP_MS=$(sed -n 's/^max_overlap_ms=\([0-9.]*\) .*/\1/p' "$T/holders.summary")
  INSIDE=$(sed -n 's/^max_overlap_ms=.* inside=\([0-9]*\)$/\1/p' "$T/holders.summary")
  ((rc == 0)) || fail_with "the holders check failed" holders "$T/holders.summary" \
    holder-a "$T/a.err" contender-b "$T/b.err"
}

# result TEXT: records a measured result of this case.
result() {
  printf '# result: %s\n' "$*"
  if [[ -n ${MONGOLOCK_FAULT_RESULTS:-} ]]; then
    printf '%s: %s\n' "$SUITE" "$*" >>"$MONGOLOCK_FAULT_RESULTS"
  fi
}
