#!/usr/bin/env bash
# Fault injection, network: the holder reaches the server through faultproxy.py, which blackholes
# (longer than the TTL, or shorter than the renew deadline at three phases of the renew cycle), delays
# every message by 1 s, or resets every connection. A contender on another host, connected straight to
# the server, waits for the lock meanwhile; the jobs' records must show that the two never ran at once.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

# Blackhole for longer than the TTL: the lease is lost. The job must be stopped before the lease can
# end on the server, mongolock must exit 76 within the kill grace + 1 s of the job's death, and the
# contender then takes over.
blackhole_longer_than_ttl() {
  local name a a_exit lease_end job_end held kill_grace_ms=500
  need_other_host
  name=$(lock_name)
  server_start
  proxy_start
  start_holder a "$PROXY_URI" "$name" 30 --ttl 3s --kill-grace "${kill_grace_ms}ms"
  a=$HOLDER_PID
  wait_acquired a
  start_contender b "$name" 1 --ttl 3s
  wait_renewals a 1 10
  proxy hold
  held=$(now_ms)
  expect_exit_code 76 "$a" a 15
  a_exit=$EXIT_MS
  lease_end=$(lease_end_ms a)
  job_end=$(job_last_ms "$HOST")
  expect_exit_code 0 "$CONTENDER_PID" b 30
  proxy pass
  check_holders
  result "blackhole > TTL (ttl 3s, kill grace ${kill_grace_ms}ms): overlap ${OVERLAP_MS}ms, exit a=76 b=0," \
    "job dead $((job_end - held))ms into the blackhole, $((lease_end - job_end))ms before the lease end;" \
    "mongolock exit $((a_exit - job_end))ms after the job's death"
  ((job_end < lease_end)) ||
    fail_with "the job ran until $((job_end - lease_end))ms after its lease ended" holders "$T/holders.summary" stderr "$T/a.err"
  (((a_exit - job_end) <= kill_grace_ms + 1000)) ||
    fail_with "mongolock exited $((a_exit - job_end))ms after its job died (kill grace + 1 s: $((kill_grace_ms + 1000))ms)" stderr "$T/a.err"
  # The run history is not tried on a server that does not answer (it would hold up the exit); it says so.
  grep -q "warning: the run was not recorded in the history: the server did not answer in time" "$T/a.err" ||
    fail_with "no warning that the run was not recorded" stderr "$T/a.err"
}

# blackhole_short PHASE: with --ttl 6s (renew every 2 s, deadline 4 s), a 1.5 s blackhole starting at
# PHASE (0.1, 0.5, 0.9) of the renew interval after a renewal: the run survives (exit 0, the job runs to
# its end) and renews again after it.
blackhole_short() {
  local phase=$1 name a before start
  need_other_host
  name=$(lock_name)
  server_start
  proxy_start
  start_holder a "$PROXY_URI" "$name" 6 --ttl 6s
  a=$HOLDER_PID
  wait_acquired a
  start_contender b "$name" 1 --ttl 6s
  wait_renewals a 1 10
  before=$(renewals a)
  sleep "$(awk -v p="$phase" 'BEGIN { print p * 2.0 }')"
  proxy hold
  start=$(now_ms)
  sleep 1.5
  proxy pass
  result "blackhole $(($(now_ms) - start))ms at phase $phase of the renew interval (ttl 6s):" \
    "started $((start - RENEWED_MS))ms after a renewal"
  expect_exit_code 0 "$a" a 20
  (($(renewals a) > before)) || fail_with "no renewal after the blackhole" stderr "$T/a.err"
  expect_exit_code 0 "$CONTENDER_PID" b 30
  check_holders
  result "  overlap ${OVERLAP_MS}ms, exit a=0 b=0, $(($(renewals a) - before)) renewal(s) after the blackhole"
}

# Every message delayed by 1 s in each direction (a round trip of 2 s), with --ttl 15s: the run keeps
# its lease (exit 0) across a renewal.
latency() {
  local name a
  need_other_host
  name=$(lock_name)
  server_start
  proxy_start
  proxy delay 1000
  start_holder a "$PROXY_URI" "$name" 8 --ttl 15s
  a=$HOLDER_PID
  wait_acquired a
  start_contender b "$name" 1 --ttl 15s
  expect_exit_code 0 "$a" a 60
  (($(renewals a) >= 1)) || fail_with "no renewal" stderr "$T/a.err"
  expect_exit_code 0 "$CONTENDER_PID" b 30
  check_holders
  result "1 s latency per message (ttl 15s): overlap ${OVERLAP_MS}ms, exit a=0 b=0, $(renewals a) renewals"
  # Red team 5, F2: the queue read after a renewal gets what is left before the next renewal (about 1 s
  # here), less than the round trip (2 s): it is skipped rather than cut, so the run keeps its one connection
  # (a cut read marked the client failed, and the next call paid a new connection's handshake).
  assert_contains "$T/a.err" "queue of waiters not read"
  assert_not_contains "$T/a.err" "could not read the queue of waiters"
  assert_not_contains "$T/a.err" "new connection (client"
}

# Every message delayed by 1.5 s in each direction (a round trip of 3 s) at the default TTL: the run keeps
# its lease across a renewal. A renewal on a connection idle for more than libmongoc's socket check interval
# (5 s by default) cost three round trips (the driver's idle check, the clock's hello, the update), 9 s
# against the renewal's 8.75 s call bound, and the run lost its lease (red team 5, F1: exit 76, 2 of 2).
latency_default_ttl() {
  local name a
  need_other_host
  name=$(lock_name)
  server_start
  proxy_start
  proxy delay 1500
  start_holder a "$PROXY_URI" "$name" 20
  a=$HOLDER_PID
  wait_acquired a
  start_contender b "$name" 1
  expect_exit_code 0 "$a" a 90
  (($(renewals a) >= 1)) || fail_with "no renewal" stderr "$T/a.err"
  expect_exit_code 0 "$CONTENDER_PID" b 60
  check_holders
  result "1.5 s latency per message (default ttl): overlap ${OVERLAP_MS}ms, exit a=0 b=0, $(renewals a) renewals"
}

# Every connection reset between two renewals (--ttl TTL; AT seconds after one): the run reconnects and
# keeps its lease (exit 0). AT is well before the next renewal (a reset while a renewal is on its way fails a
# write that may have been sent: that pins, rightly). The next renewal fails at its clock hello on the dead
# connection, before its findAndModify had a connection: nothing of it was sent, so it pins nothing (red team 6 F4: at --ttl 3s the
# pin, 1.8 s, outlasted the renew deadline and the run exited 76 although its retry was confirmed 270 ms
# later; 2 of 2). The job runs 10 s; the contender takes the lock after it.
connections_reset() {
  local ttl=$1 at=$2 name a before
  need_other_host
  name=$(lock_name)
  server_start
  proxy_start
  start_holder a "$PROXY_URI" "$name" 10 --ttl "$ttl"
  a=$HOLDER_PID
  wait_acquired a
  start_contender b "$name" 1 --ttl "$ttl"
  wait_renewals a 1 10
  before=$(renewals a)
  sleep "$at"
  proxy reset
  expect_exit_code 0 "$a" a 20
  (($(renewals a) > before)) || fail_with "no renewal after the reset" stderr "$T/a.err"
  assert_matches "$T/a.err" "lease renewal of '$name' failed, retrying"
  assert_matches "$T/a.err" "lease renewal of '$name' was not sent: it failed before its write had a connection"
  assert_not_matches "$T/a.err" "counts from .* ago until a renewal after"
  expect_exit_code 0 "$CONTENDER_PID" b 30
  check_holders
  result "connections reset between renewals (ttl $ttl, ${at}s after one): overlap ${OVERLAP_MS}ms, exit a=0 b=0"
}

run_case "blackhole longer than the TTL: job stopped before the lease ends, prompt exit 76, no overlap" blackhole_longer_than_ttl
run_case "blackhole shorter than the renew deadline, just after a renewal: exit 0, no overlap" blackhole_short 0.1
run_case "blackhole shorter than the renew deadline, mid-interval: exit 0, no overlap" blackhole_short 0.5
run_case "blackhole shorter than the renew deadline, across a renewal: exit 0, no overlap" blackhole_short 0.9
run_case "1 s latency per message: exit 0, no overlap" latency
run_case "1.5 s latency per message at the default TTL: exit 0, no overlap" latency_default_ttl
run_case "connections reset between renewals (--ttl 6s): nothing of the next sent, no pin, exit 0, no overlap" \
  connections_reset 6s 1.0
run_case "connections reset 0.3 s after a renewal (--ttl 3s): nothing of the next sent, no pin, exit 0, no overlap" \
  connections_reset 3s 0.3
finish
