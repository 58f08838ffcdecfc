#!/usr/bin/env bash
# Fault injection, server: FerretDB SIGKILLed and started again on the same port and data for 0.3 s or
# 1.5 s just as a renewal is due, with the default TTL and with --ttl 9s: the run keeps its lease (exit 0)
# and a contender on another host takes the lock only after it; and `acquire` killed with SIGKILL at
# random moments leaves no lock that outlives the TTL plus the takeover grace.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

# server_restart DOWN_S TTL_S JOB_S [RUN OPTIONS...]: the server is killed 200 ms before the first
# renewal is due (TTL/3 after the acquisition) and started again DOWN_S later.
server_restart() {
  local down=$1 ttl_s=$2 job_s=$3 name a wait_ms down_ms back_ms renewed
  shift 3
  need_other_host
  name=$(lock_name)
  server_start
  start_holder a "$SERVER_URI" "$name" "$job_s" "$@"
  a=$HOLDER_PID
  wait_acquired a
  wait_ms=$((ttl_s * 1000 / 3 - 200 - ($(now_ms) - ACQUIRED_MS)))
  ((wait_ms > 0)) && sleep "$(awk -v ms="$wait_ms" 'BEGIN { print ms / 1000 }')"
  (($(renewals a) == 0)) || fail_with "a renewed before the server went away" stderr "$T/a.err"
  server_kill
  sleep "$down"
  server_start
  start_contender b "$name" 1 "$@"
  down_ms=$((SERVER_UP_MS - SERVER_DOWN_MS))
  back_ms=$SERVER_UP_MS
  # The next renewal after the server came back: how long the outage cost.
  wait_renewals a 1 $((ttl_s * 2 / 3 + 2))
  renewed=$RENEWED_MS
  expect_exit_code 0 "$a" a $((job_s + 10))
  expect_exit_code 0 "$CONTENDER_PID" b 30
  check_holders
  result "server down ${down_ms}ms at a renewal (ttl ${ttl_s}s): overlap ${OVERLAP_MS}ms, exit a=0 b=0," \
    "renewed $((renewed - back_ms))ms after the server answered again"
}

# acquire killed with SIGKILL at random moments (from its start to as long as a whole acquire takes:
# connecting, creating the indexes, inserting, purging an expired lock, inserting again), 25 times,
# with --ttl 1s and --grace 200ms: after every kill, the stored lock (if any) must end within the TTL of
# the kill; TTL + grace after the last kill, another holder must get the lock.
acquire_killed() {
  local name i killed rc expires killed_ms=0 kills=0 done_before=0 held=0 slack_ms=50 start full_ms
  name=$(lock_name)
  server_start
  # How long a whole acquire takes here (of a name of its own).
  start=$(now_ms)
  expect_exit 0 -- ml acquire "$name-calibration" --ttl 1s
  full_ms=$(($(now_ms) - start))
  for ((i = 1; i <= 25; i++)); do
    start_bg acquire ml --grace 200ms acquire "$name" --ttl 1s --process "$HOST:$((1000 + i))"
    sleep "$(printf '0.%03d' $((RANDOM % (full_ms + 1))))"
    kill -KILL "$BG_PID" 2>/dev/null || true
    killed=$(now_ms)
    wait_bg "$BG_PID" acquire 10
    case $BG_STATUS in
    137) kills=$((kills + 1)) ;;
    0) done_before=$((done_before + 1)) ;;
    75) held=$((held + 1)) ;;
    *) fail_with "acquire exited $BG_STATUS" stdout "$T/acquire.out" stderr "$T/acquire.err" ;;
    esac
    rc=0
    python3 "$ITEST_DIR/mongo.py" doc "$name" >"$T/doc" || rc=$?
    if ((rc == 0)); then
      expires=$(doc_field expires_at)
      ((expires <= killed + 1000 + slack_ms)) ||
        fail_with "after acquire was killed at $killed the lock expires at $expires: later than the TTL" doc "$T/doc"
    elif ((rc != 1)); then
      fail "cannot read the lock document (mongo.py exited $rc)"
    fi
    killed_ms=$killed
    sleep "0.$(printf '%03d' $((RANDOM % 400)))"
  done
  # TTL + takeover grace after the last kill (plus the clock slack), the lock can be taken.
  sleep "$(awk -v ms=$((killed_ms + 1000 + 200 + slack_ms - $(now_ms))) 'BEGIN { print (ms > 0 ? ms : 0) / 1000 }')"
  expect_exit 0 -- ml --grace 200ms acquire "$name" --ttl 10s --process "host-c:1"
  assert_held_by "$name" "host-c:1"
  assert_eq "$(doc_count)" 2 "lock documents (the calibration's and host-c's)"
  result "acquire (${full_ms}ms when whole) killed 25 times: $kills killed in flight, $done_before had acquired, $held found it held;" \
    "every lock ended within the TTL (+${slack_ms}ms clock slack) of the kill; taken over TTL + grace after the last kill"
  ((kills >= 5)) || fail "only $kills of 25 acquires were killed in flight: the test did not test much"
}

# A waiter (acquire --wait 60s, first in the queue) while the server is down 2 s and started again: it waits
# on and takes the lock once it is released (red team 6, F5: it exited 69 at the first poll that met the
# server down).
waiter_rides_out_a_restart() {
  local name pid waiter
  server_start
  for waiter in acquire run; do
    name=$(lock_name "w$waiter")
    ml acquire "$name" --process "$HOST:4242" --ttl 10m >/dev/null
    if [[ $waiter == acquire ]]; then
      start_bg w ml -v acquire "$name" --wait 60s
    else
      start_bg w ml -v run "$name" --wait 60s -- true
    fi
    pid=$BG_PID
    wait_until 10 grep -q "first in the queue" "$T/w.err"
    server_kill
    sleep 2 # the server is down for a while (time must pass)
    server_start
    expect_exit 0 -- ml release "$name" --process "$HOST:4242"
    expect_bg_exit 0 "$pid" w 40
    assert_contains "$T/w.err" "the server did not answer"
    result "$waiter --wait: server down $((SERVER_UP_MS - SERVER_DOWN_MS))ms while queued: exit 0"
  done
}

run_case "server restarted after 0.3 s at a renewal, default TTL: exit 0, no overlap" server_restart 0.3 30 13
run_case "server restarted after 1.5 s at a renewal, default TTL: exit 0, no overlap" server_restart 1.5 30 14
run_case "server restarted after 0.3 s at a renewal, --ttl 9s: exit 0, no overlap" server_restart 0.3 9 6 --ttl 9s
run_case "server restarted after 1.5 s at a renewal, --ttl 9s: exit 0, no overlap" server_restart 1.5 9 7 --ttl 9s
run_case "a waiter rides out a 2 s server restart (acquire --wait, run --wait)" waiter_rides_out_a_restart
run_case "acquire killed at random moments: no lock outlives TTL + grace" acquire_killed
finish
