#!/usr/bin/env bash
# run renews its lease while the command runs: a command that outlives its TTL several times keeps the
# lock, concurrent acquires keep failing, and status shows the renewals.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

outlives_ttl_keeps_lock() {
  local name pid
  name=$(lock_name)
  # -v: the log shows each renewal. The command runs until the test lets it end ($T/go), after 7s of
  # checks (3.5 TTLs): a contender's acquire that succeeds during the checks is always a double holder,
  # never a race with the run's own release.
  start_bg run ml -v run "$name" --ttl 2s -- sh -c 'while [ ! -e "$1/go" ]; do sleep 0.05; done; touch "$1/done"' _ "$T"
  pid=$BG_PID
  wait_until 10 is_held "$name"
  local start attempts=0 late=0 rc now renewed last_renewed="" renewals=0 left
  start=$(now_ms)
  while (($(now_ms) - start < 7000)); do
    pid_alive "$pid" || fail_with "the run ended during the checks" stderr "$T/run.err"
    # A contender with a tiny takeover grace: it would get in 2.1s after the last renewal.
    rc=0
    ml --grace 100ms acquire "$name" --process "$HOST:1" >"$T/acquire.out" 2>"$T/acquire.err" || rc=$?
    case $rc in
    75) ;;
    0) fail_with "a contender got the lock $(($(now_ms) - start))ms into the run" stderr "$T/run.err" ;;
    *) fail_with "contender's acquire exited $rc" stderr "$T/acquire.err" ;;
    esac
    attempts=$((attempts + 1))
    now=$(now_ms)
    ((now - start < 3000)) || late=$((late + 1))

    rc=0
    ml status "$name" >"$T/status" 2>&1 || rc=$?
    ((rc == 0)) || fail_with "status exited $rc during the run" status "$T/status"
    renewed=$(status_field "$T/status" renewed)
    renewed=${renewed%% *}
    left=$(status_left_ms "$T/status")
    ((left > 0)) || fail_with "the lock shows as expired during the run" status "$T/status"
    if [[ $renewed != "$last_renewed" ]]; then
      [[ -z $last_renewed || $renewed > $last_renewed ]] || fail "renewed went back: $last_renewed -> $renewed"
      last_renewed=$renewed
      renewals=$((renewals + 1))
    fi
    sleep 0.2
  done
  touch "$T/go"
  expect_bg_exit 0 "$pid" run 20
  [[ -e $T/done ]] || fail "the command did not run to its end"
  ((late >= 3)) || fail "only $late contender attempts after TTL + grace ($attempts in all)"
  # The status checks saw the renewed time move forward several times.
  ((renewals >= 3)) || fail "status showed only $renewals different renewal times"
  local logged
  logged=$(grep -c "renewed until" "$T/run.err" || true)
  ((logged >= 5)) || fail_with "only $logged renewals logged in 7s with --ttl 2s" stderr "$T/run.err"
  assert_not_contains "$T/run.err" "warning"
  assert_not_contains "$T/run.err" "error"
  assert_free "$name"
}

# Renewals move expires_at forward and keep the TTL; acquired_at stays.
renewal_updates_document() {
  local name pid
  name=$(lock_name)
  start_bg run ml run "$name" --ttl 3s -- sh -c 'while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  pid=$BG_PID
  wait_until 10 is_held "$name"
  read_doc "$name"
  local acquired first_expires first_renewed
  acquired=$(doc_field acquired_at)
  first_expires=$(doc_field expires_at)
  first_renewed=$(doc_field renewed_at)
  assert_eq "$first_renewed" "$acquired" "renewed_at before any renewal"
  # Wait for two renewals (every 1s).
  wait_until 15 eval "read_doc $name && (( \$(doc_field renewed_at) >= first_renewed + 1500 ))"
  read_doc "$name"
  assert_eq "$(doc_field acquired_at)" "$acquired" "acquired_at after renewals"
  assert_eq "$(doc_field ttl_ms)" "3000" "ttl_ms after renewals"
  assert_eq "$(($(doc_field expires_at) - $(doc_field renewed_at)))" "3000" "expires_at - renewed_at"
  (($(doc_field expires_at) > first_expires)) || fail "expires_at did not move forward"
  touch "$T/go"
  expect_bg_exit 0 "$pid" run
  assert_free "$name"
}

# The heartbeat's thread starts 500 ms before the first renewal is due (issue 30): a job that ends before
# then runs beside mongolock's main thread only; one that runs on is renewed by a second thread. The job
# counts the threads of mongolock, its guardian's parent.
heartbeat_thread_only_when_due() {
  local name count='ls "/proc/$(ps -o ppid= -p "$PPID" | tr -d " ")/task" | wc -l >"$1"'
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" -- sh -c "$count" _ "$T/short"
  [[ $(cat "$T/short") == 1 ]] || fail "a job that ended long before the first renewal ran beside $(cat "$T/short") threads of mongolock, not 1"
  # --ttl 2s: the first renewal is due at 667 ms, so the thread runs from 167 ms on.
  expect_exit 0 -- ml -v run "$name" --ttl 2s -- sh -c "sleep 1; $count" _ "$T/long"
  [[ $(cat "$T/long") == 2 ]] || fail "a job past its first renewal ran beside $(cat "$T/long") threads of mongolock, not 2"
  assert_contains "$ERR" "lease on '$name' renewed until"
}

run_case "a command running 3.5x its TTL keeps the lock; contenders get 75 throughout" outlives_ttl_keeps_lock
run_case "the heartbeat's thread starts only when the first renewal is near" heartbeat_thread_only_when_due
run_case "renewals move expires_at/renewed_at forward, keep acquired_at and ttl" renewal_updates_document
finish
