#!/usr/bin/env bash
# run limits and lease knobs: --timeout stops CMD (SIGTERM, SIGKILL after --kill-after) with exit 124 and
# releases the lock; --on-lost ignore lets CMD run on after the lease is lost, --on-lost kill kills it
# (76); --renew-interval / --renew-deadline / --kill-grace are validated together and valid ones work.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

timeout_stops_command() {
  local name start elapsed
  name=$(lock_name)
  start=$(now_ms)
  expect_exit 124 -- ml run "$name" --timeout 1s -- sh -c 'echo $$ >"$1/pid"; exec sleep 30' _ "$T"
  elapsed=$(($(now_ms) - start))
  ((elapsed < 20000)) || fail "--timeout 1s took ${elapsed}ms"
  assert_contains "$ERR" "--timeout 1s"
  ! pid_alive "$(cat "$T/pid")" || fail "the command still runs after exit 124"
  assert_free "$name"
  # A command that ends in time is not affected.
  expect_exit 0 -- ml run "$name" --timeout 10s -- true
  expect_exit 3 -- ml run "$name" --timeout 10s -- sh -c 'exit 3'
  assert_free "$name"
}

# A command that ignores SIGTERM is SIGKILLed --kill-after later; still 124, lock released; the history
# says it died of SIGKILL (mongolock's guardian killed it), as the messages do.
timeout_kill_after() {
  local name
  name=$(lock_name)
  expect_exit 124 -- ml run "$name" --timeout 1s --kill-after 1s -- \
    sh -c 'trap "" TERM; echo $$ >"$1/pid"; while :; do sleep 0.1; done' _ "$T"
  assert_contains "$ERR" "SIGKILL after 1s"
  assert_contains "$ERR" "sending SIGKILL"
  ! pid_alive "$(cat "$T/pid")" || fail "the command survived SIGKILL"
  assert_free "$name"
  expect_exit 0 -- ml history "$name" --json
  assert_matches "$OUT" '"signal": ?"KILL"'
  expect_exit 0 -- ml history "$name"
  assert_matches "$OUT" "timeout +124 +SIGKILL"
}

# The whole process group is stopped, not only the direct child.
timeout_stops_process_group() {
  local name
  name=$(lock_name)
  expect_exit 124 -- ml run "$name" --timeout 1s -- sh -c 'sleep 30 & echo $! >"$1/grandchild"; wait' _ "$T"
  wait_until 10 eval '! pid_alive "$(cat "$T/grandchild")"'
  assert_free "$name"
}

# --on-lost ignore: the command releases its own lock (so the lease is lost) and keeps running; run exits
# with the command's status. (The document removed as another client that knows the token would, mongo.py
# remove: the run's own command is refused, test_lease_lost.)
on_lost_ignore_keeps_running() {
  local name
  name=$(lock_name)
  start_bg run ml run "$name" --ttl 3s --on-lost ignore -- sh -c '
    python3 "$MONGO_PY" remove "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN" || exit 90
    i=0; until grep -q "lost" "$1/run.err"; do i=$((i + 1)); [ $i -lt 300 ] || exit 91; sleep 0.1; done
    sleep 1; touch "$1/survived"; exit 7' _ "$T"
  local pid=$BG_PID
  expect_bg_exit 7 "$pid" run 40
  [[ -e $T/survived ]] || fail_with "the command did not run on" stderr "$T/run.err"
  assert_contains "$T/run.err" "lease on '$name' lost"
  assert_contains "$T/run.err" "--on-lost ignore"
  assert_free "$name"
}

# The default (term): the command is stopped, exit 76.
on_lost_term_stops() {
  local name
  name=$(lock_name)
  expect_exit 76 -- ml run "$name" --ttl 3s -- sh -c '
    python3 "$MONGO_PY" remove "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN" || exit 90
    echo $$ >"$1/pid"; sleep 30; touch "$1/survived"' _ "$T"
  [[ ! -e $T/survived ]] || fail "the command ran on"
  ! pid_alive "$(cat "$T/pid")" || fail "the command still runs"
  assert_contains "$ERR" "SIGTERM"
}

# --on-lost kill: SIGKILL at once, even to a command that ignores SIGTERM; exit 76.
on_lost_kill() {
  local name
  name=$(lock_name)
  expect_exit 76 -- ml run "$name" --ttl 3s --on-lost kill -- sh -c '
    trap "" TERM
    python3 "$MONGO_PY" remove "$MONGOLOCK_NAME" "$MONGOLOCK_TOKEN" || exit 90
    echo $$ >"$1/pid"; sleep 30; touch "$1/survived"' _ "$T"
  assert_contains "$ERR" "killing the command"
  [[ ! -e $T/survived ]] || fail "the command ran on"
  ! pid_alive "$(cat "$T/pid")" || fail "the command still runs after --on-lost kill"
  assert_free "$name"
}

bad_on_lost() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml run "$name" --on-lost sometimes -- touch "$T/ran"
  assert_error_line "--on-lost"
  [[ ! -e $T/ran ]] || fail "run started its command"
}

renew_interval_not_below_deadline() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml run "$name" --renew-interval 20s -- touch "$T/ran"
  assert_error_line "--renew-interval 20s must be shorter than --renew-deadline 20s"
  expect_exit 64 -- ml run "$name" --ttl 10s --renew-interval 5s --renew-deadline 5s -- touch "$T/ran"
  assert_error_line "--renew-interval"
  expect_exit 64 -- ml run "$name" --ttl 10s --renew-interval 6s --renew-deadline 5s -- touch "$T/ran"
  # A deadline that leaves no time to stop the command within the TTL.
  expect_exit 64 -- ml run "$name" --ttl 10s --renew-deadline 10s -- touch "$T/ran"
  assert_error_line "--renew-deadline"
  [[ ! -e $T/ran ]] || fail "run started its command"
  assert_free "$name"
}

kill_grace_too_long() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml run "$name" --ttl 3s --kill-grace 5s -- touch "$T/ran"
  assert_error_line "--kill-grace 5s is too long for --ttl 3s"
  # The suggestion: the longest kill grace for this TTL, and the shortest TTL for this grace.
  assert_matches "$ERR" "use --kill-grace [0-9.]+m?s or less, or a --ttl of at least [0-9]+s"
  expect_exit 64 -- ml run "$name" --kill-grace 1m -- touch "$T/ran"
  assert_error_line "--kill-grace 1m is too long for --ttl 30s"
  [[ ! -e $T/ran ]] || fail "run started its command"
  # The suggested values work.
  local grace ttl
  grace=$(sed -n 's/.*use --kill-grace \([^ ]*\) or less.*/\1/p' "$ERR")
  ttl=$(sed -n 's/.*a --ttl of at least \([^;. ]*\).*/\1/p' "$ERR")
  expect_exit 0 -- ml run "$name" --kill-grace "$grace" -- true
  expect_exit 0 -- ml run "$name" --ttl "$ttl" --kill-grace 1m -- true
}

bad_knob_values() {
  local name opt
  name=$(lock_name)
  for opt in --renew-interval --renew-deadline --kill-grace --timeout --kill-after; do
    expect_exit 64 -- ml run "$name" "$opt" 5 -- touch "$T/ran"
    assert_error_line "$opt"
    expect_exit 64 -- ml run "$name" "$opt" 0s -- touch "$T/ran"
  done
  expect_exit 64 -- ml run "$name" --ttl 500ms -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command"
}

# Succeeds when lock $1 was renewed at least $2 ms after $3 (epoch ms).
renewed_since() {
  read_doc "$1"
  (($(doc_field renewed_at) >= $3 + $2))
}

# Valid custom knobs are accepted and used: renewals every 500ms show in the document.
custom_knobs_accepted() {
  local name acquired
  name=$(lock_name)
  start_bg run ml -v run "$name" --ttl 6s --renew-interval 500ms --renew-deadline 3s --kill-grace 1s --on-lost term \
    --timeout 1m --kill-after 2s -- sh -c 'touch "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  local pid=$BG_PID
  wait_file 10 "$T/started"
  read_doc "$name"
  acquired=$(doc_field acquired_at)
  assert_eq "$(doc_field ttl_ms)" "6000" "ttl_ms"
  # Two renewals within a few seconds (the default interval, 2s, would give at most one).
  wait_until 10 renewed_since "$name" 1000 "$acquired"
  touch "$T/go"
  expect_bg_exit 0 "$pid" run
  assert_contains "$T/run.err" "renewed until"
  assert_free "$name"
  # Through the environment too.
  expect_exit 0 -- env MONGOLOCK_RENEW_INTERVAL=1s MONGOLOCK_RENEW_DEADLINE=3s MONGOLOCK_KILL_GRACE=1s \
    "$MONGOLOCK_BIN" run "$name" --ttl 6s -- true
  expect_exit 64 -- env MONGOLOCK_RENEW_INTERVAL=3s MONGOLOCK_RENEW_DEADLINE=3s "$MONGOLOCK_BIN" run "$name" --ttl 6s -- true
  assert_error_line "--renew-interval"
}

# No process can be made for the command (a cgroup v1 pids group at its pids.max: room for mongolock and its
# guardian only): 126 "cannot execute 'sh': Resource temporarily unavailable", not "started", and the lock
# released. Before the fix (red team 10, F5) -v said "started sh" and then "command exited with status 126".
no_process_for_the_command() {
  local name group=/sys/fs/cgroup/pids/mongolock-test-$$
  [[ -d /sys/fs/cgroup/pids && -w /sys/fs/cgroup/pids ]] || skip "no writable cgroup v1 pids hierarchy"
  mkdir "$group" || skip "cannot make a pids group"
  name=$(lock_name)
  echo 2 >"$group/pids.max"
  expect_exit 126 -- sh -c 'echo $$ >"$1/tasks"; shift; exec "$@"' sh "$group" \
    "$MONGOLOCK_BIN" run -v "$name" -- sh -c 'echo ran'
  rmdir "$group" 2>/dev/null || true
  assert_contains "$ERR" "cannot execute 'sh': Resource temporarily unavailable"
  assert_not_contains "$ERR" "started sh"
  assert_not_contains "$OUT" "ran"
  assert_free "$name"
}

run_case "--timeout 1s -- sleep 30: 124, command stopped, lock released" timeout_stops_command
run_case "--timeout: a command ignoring SIGTERM is SIGKILLed after --kill-after" timeout_kill_after
run_case "--timeout stops the command's whole process group" timeout_stops_process_group
run_case "--on-lost ignore keeps the command running after the lease is lost" on_lost_ignore_keeps_running
run_case "--on-lost term (default): the command is stopped, 76" on_lost_term_stops
run_case "--on-lost kill: the command is killed, 76" on_lost_kill
run_case "--on-lost with a bad value: 64" bad_on_lost
run_case "--renew-interval >= --renew-deadline, or a deadline too long: 64" renew_interval_not_below_deadline
run_case "--kill-grace too long for --ttl: 64 with a suggestion that works" kill_grace_too_long
run_case "no process for the command (pids.max): 126 'cannot execute ...', not 'started'; released" \
  no_process_for_the_command
run_case "bad knob durations: 64" bad_knob_values
run_case "valid custom lease knobs are accepted and used" custom_knobs_accepted
finish
