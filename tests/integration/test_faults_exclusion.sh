#!/usr/bin/env bash
# Fault injection, the two exclusion holes of issue #19 (found on 0.2.0 against FerretDB v1):
#
# 1. A waiter's update of the holder's lock document (its "waiters" mark) could roll back the holder's
#    renewal on a server whose updates read the document and write it back whole; a partition right
#    after that left the holder's job running past the lease that the server kept. Now nothing but the
#    holder updates its lock document: the holder marks its own lock after reading the queue. The case
#    has a real head waiter on another host queued while the holder renews, cuts the holder off right
#    after a renewal, and checks that the jobs never overlap and that the waiter sent no update to the
#    locks collection before it held the lock (the regression guard: any waiter update there reopens
#    the hole; its deletes are the purge of a lock expired more than the takeover grace ago, which no
#    renewal can match: ARCHITECTURE.md, "Who writes a lock document").
# 2. A run stopped (or slowed) between its acquisition and the start of its job started the job after
#    its lease had ended. Now the renew deadline bounds the start: a run stopped between its insert of
#    the first name and the spawn, long enough for another host to take that name over, exits 76
#    without starting its job; so does one whose acquisition is slower than the renew deadline.
# 3. A renewal whose outcome is unknown (its reply lost) may still be running on a server whose updates
#    read, then write back by _id, and write its older expiry over a newer renewal's. Now such a renewal
#    pins the lease to its send time until it can no longer be written (ARCHITECTURE.md, "Who writes a
#    lock document"). The proxy keeps one renewal back, fails it on the holder's side, and writes it back
#    (filter as at the newer renewal's read) right after the next renewal was answered; then the holder is
#    cut off and a waiter takes over at the rolled-back expiry: no overlap.
# Each case runs several times: the holes were timing races, and a regression must show.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

REPEATS=3

# The lines of LABEL's -v log before it held its lock (all of them if it never did).
before_acquired() { sed -n "1,/acquired lock '/p" "$T/$1.err"; }

# Holder a (through the proxy, --ttl 6s, a job that ignores SIGTERM so that it runs to the kill grace)
# with head waiter b queued; cut a off at once after its renewal: a exits 76 with its job dead before
# its lease ends, b takes over, no overlap, and b wrote nothing to the locks collection while waiting.
partition_after_a_renewal_with_a_waiter() {
  local name a round held job_end
  need_other_host
  server_start
  proxy_start
  for ((round = 1; round <= REPEATS; round++)); do
    name=$(lock_name "x$round")
    : >"$HOLDERS"
    rm -f "$T/a.exit_ms"
    JOB_OPTIONS=--ignore-term start_holder a "$PROXY_URI" "$name" 60 --ttl 6s --kill-grace 1s
    a=$HOLDER_PID
    wait_acquired a
    start_contender b "$name" 1 --ttl 6s
    # The holder sees the queue after a renewal and marks its own lock: wait for that, then for one more
    # renewal, and cut the holder off right after it (where a rolled-back renewal would have hurt).
    wait_until 20 grep -q "marked lock '$name': waiters are queued" "$T/a.err"
    wait_renewals a $(($(renewals a) + 1)) 10
    proxy hold
    held=$(now_ms)
    expect_exit_code 76 "$a" a 20
    lease_end=$(lease_end_ms a)
    job_end=$(job_last_ms "$HOST")
    expect_exit_code 0 "$CONTENDER_PID" b 30
    proxy pass
    check_holders
    before_acquired b >"$T/b.before"
    grep -q "acquired lock '$name'" "$T/b.before" || fail_with "the waiter never held the lock" stderr "$T/b.err"
    assert_not_matches "$T/b.before" "command update sent to $MONGOLOCK_COLLECTION$"
    ((job_end < lease_end)) ||
      fail_with "round $round: the job ran until $((job_end - lease_end))ms after its lease ended" \
        holders "$T/holders.summary" stderr "$T/a.err"
    result "round $round: partition right after a renewal, a head waiter queued: overlap ${OVERLAP_MS}ms," \
      "exit a=76 b=0, job dead $((job_end - held))ms into the partition, $((lease_end - job_end))ms before" \
      "the lease end; the waiter wrote no lock document"
  done
}

# Holder a (--ttl 10s, renew every 2s, renew deadline 6s, kill grace 3s, a job that ignores SIGTERM),
# head waiter b: a's second renewal (sent at S) is kept back by the proxy and a's connection reset 2.5 s
# later; a retries at about S + 3 s; right after that renewal is answered the kept one is written over it
# (the document's expiry goes back to S + TTL); then a is cut off. Counting from the confirmed renewal, a
# would stop its job at S + 3 + 6 + 3 s, after b takes over at S + 10 + 0.5 s: a counts from S instead.
unknown_renewal_written_late() {
  local name a round held job_end
  need_other_host
  server_start
  proxy_start
  for ((round = 1; round <= REPEATS; round++)); do
    name=$(lock_name "u$round")
    : >"$HOLDERS"
    rm -f "$T/a.exit_ms"
    : >"$T/proxy.log"
    JOB_OPTIONS=--ignore-term start_holder a "$PROXY_URI" "$name" 60 \
      --ttl 10s --renew-interval 2s --renew-deadline 6s --kill-grace 3s
    a=$HOLDER_PID
    wait_acquired a
    # After the first renewal: on FerretDB it is refused for its server-time condition and sent again
    # without it, and every later renewal goes without it; the kept one must be such a renewal (one that
    # carries the condition is refused again when written back: "n=0").
    wait_renewals a 1 10
    proxy stale-renewal 2500
    start_contender b "$name" 1 --ttl 10s
    wait_until 20 grep -q "stale renewal written back" "$T/proxy.log"
    proxy hold
    held=$(now_ms)
    assert_contains "$T/proxy.log" "stale renewal written back: n=1"
    expect_exit_code 76 "$a" a 30
    job_end=$(job_last_ms "$HOST")
    expect_exit_code 0 "$CONTENDER_PID" b 40
    proxy pass
    check_holders
    result "round $round: a renewal written back late over a newer one, then a partition: overlap" \
      "${OVERLAP_MS}ms, exit a=76 b=0, a's job dead $((job_end - held))ms into the partition"
  done
}

# run NAME-a NAME-b (through a proxy that delays every message by 300 ms, so the stop lands between the
# first insert and the spawn), SIGSTOPped right after its insert of NAME-a was sent; another host takes
# NAME-a over meanwhile; after SIGCONT the run exits 76 and never starts its job.
stopped_between_insert_and_spawn() {
  local base a round cont started
  need_other_host
  server_start
  proxy_start
  for ((round = 1; round <= REPEATS; round++)); do
    base=$(lock_name "s$round")
    rm -f "$T/started"
    proxy delay 300
    start_bg a setsid "$MONGOLOCK_BIN" -v --uri "$PROXY_URI" run --ttl 2s "$base-a" "$base-b" -- \
      touch "$T/started"
    a=$BG_PID
    local deadline=$(($(now_ms) + 20000))
    until grep -q "command insert sent to $MONGOLOCK_COLLECTION$" "$T/a.err" 2>/dev/null; do
      (($(now_ms) < deadline)) || fail_with "round $round: no insert sent" stderr "$T/a.err"
      sleep 0.002
    done
    # That line is logged just before the insert is written: stop the run once it waits for the reply (in
    # poll(2), system call 7 on x86-64), so the insert has left; a stop between the two kept it back, and
    # NAME-a was never held (CI, 1 of 3 rounds).
    until [[ $(cut -d' ' -f1 "/proc/$a/syscall" 2>/dev/null) == 7 ]]; do
      (($(now_ms) < deadline)) || fail_with "round $round: the run never waited for the insert's reply" stderr "$T/a.err"
      sleep 0.001
    done
    kill -STOP "$a"
    # The insert (delayed by the proxy) lands while the run is stopped: NAME-a is held by it. Then, after
    # TTL 2 s + grace 500 ms, the other host takes NAME-a over while this run is still stopped.
    wait_until 5 is_held "$base-a"
    start_bg c unshare --uts sh -c 'hostname "$0" && exec "$@"' "$CONTENDER_HOST" \
      "$MONGOLOCK_BIN" --grace 500ms --uri "$SERVER_URI" run "$base-a" --wait 10s -- \
      sh -c 'touch "$1/c-started"; sleep 3' _ "$T"
    cont=$BG_PID
    wait_until 10 test -e "$T/c-started"
    proxy pass
    kill -CONT "$a"
    expect_exit_code 76 "$a" a 20
    started=no
    [[ -e $T/started ]] && started=yes
    [[ $started == no ]] || fail_with "round $round: the job started after its lease had ended" stderr "$T/a.err"
    assert_contains "$T/a.err" "ended before the command could start"
    expect_exit_code 0 "$cont" c 20
    rm -f "$T/c-started"
    # Nothing of the stopped run is left: its NAME-b was released, NAME-a is the other host's (now free).
    assert_free "$base-b"
    result "round $round: stopped between the insert of $base-a and the spawn, $base-a taken over" \
      "meanwhile: exit a=76, job started: $started"
  done
}

# A slow server (every message delayed 300 ms, a round trip 600 ms: within run's 1 s command timeout with
# 400 ms for the server itself; at 400 ms a loaded machine's createIndexes once took longer than the last
# 150 ms and the run exited 69; --ttl 2s: renew deadline 1.3 s): acquiring two names (handshake,
# createIndexes, two inserts: four round trips, 2.4 s) takes longer than the renew deadline, so the job is
# never started and the run exits 76; its locks are given back (the release, after the check, is not
# bounded by the lease).
slow_acquisition_past_the_deadline() {
  local base a round
  server_start
  proxy_start
  proxy delay 300
  for ((round = 1; round <= REPEATS; round++)); do
    base=$(lock_name "d$round")
    rm -f "$T/started"
    start_bg a "$MONGOLOCK_BIN" -v --uri "$PROXY_URI" run --ttl 2s "$base-a" "$base-b" -- touch "$T/started"
    a=$BG_PID
    expect_exit_code 76 "$a" a 60
    [[ ! -e $T/started ]] || fail_with "round $round: the job started after the renew deadline" stderr "$T/a.err"
    assert_contains "$T/a.err" "ended before the command could start"
    wait_until 10 is_free "$base-a"
    wait_until 10 is_free "$base-b"
    result "round $round: acquisition through a 300 ms/message proxy: exit 76, job not started"
  done
}

# The queue's own rule (only the head takes the lock) under a slow network: waiter w1 (through the proxy)
# joins first, w2 second; then w1's messages are delayed 600 ms each way, so its next ticket renewal is
# answered after 1.2 s. Such a renewal may have raced another waiter's delete of the ticket as dead, so
# it does not count: w1 joins again at the back, and w2 gets the lock first.
slow_ticket_renewal_rejoins_at_the_back() {
  local name w1 w2
  server_start
  proxy_start
  name=$(lock_name q)
  ml acquire "$name" --process "$HOST:4242" >/dev/null
  start_bg w1 "$MONGOLOCK_BIN" -v --uri "$PROXY_URI" run "$name" --wait 60s -- sh -c 'echo w1 >>"$1/order"' _ "$T"
  w1=$BG_PID
  wait_until 10 eval '[[ $(python3 "$ITEST_DIR/mongo.py" tickets "$name" | wc -l) == 1 ]]'
  start_bg w2 ml run "$name" --wait 60s -- sh -c 'echo w2 >>"$1/order"' _ "$T"
  w2=$BG_PID
  wait_until 10 eval '[[ $(python3 "$ITEST_DIR/mongo.py" tickets "$name" | wc -l) == 2 ]]'
  proxy delay 600
  wait_until 15 grep -q "the queue ticket of '$name' was lost (its renewal took" "$T/w1.err"
  proxy pass
  expect_exit 0 -- ml release "$name" --process "$HOST:4242"
  expect_exit_code 0 "$w2" w2 30
  expect_exit_code 0 "$w1" w1 30
  assert_eq "$(tr '\n' ' ' <"$T/order")" "w2 w1 " "order of the grants"
  result "a ticket renewal answered after $(sed -n "s/.*its renewal took \([^,]*\),.*/\1/p" "$T/w1.err" | head -n 1): the waiter rejoined at the back"
}

# A lopsided handshake (found by review): the holder's first hello reply comes 4.8 s late (its estimate of
# the server's clock lags 2.4 s), the contender's first hello request does (its estimate runs 2.4 s ahead),
# both within the default 5 s connect timeout. With midpoint estimates the contender saw the holder's
# fresh lock as expired more than the 2 s grace ago and purged it. Now expiries are written from the
# latest the server's clock can read and takeovers decided from the earliest: the contender is skipped.
lopsided_handshake_never_takes_over_a_live_lock() {
  local name a c round hold_ctl hold_uri cont_ctl cont_uri
  need_other_host
  server_start
  proxy_start
  hold_ctl=$PROXY_CTL hold_uri=$PROXY_URI
  cont_ctl=$T/proxy2
  mkdir "$cont_ctl"
  python3 "$PROXY_PY" serve "$T/proxy2.port" "$SERVER_PORT" "$cont_ctl" 2>"$T/proxy2.log" &
  track $!
  wait_until 10 test -s "$T/proxy2.port"
  cont_uri=mongodb://127.0.0.1:$(cat "$T/proxy2.port")/
  for ((round = 1; round <= 2; round++)); do
    name=$(lock_name "l$round")
    : >"$HOLDERS"
    rm -f "$T/a.exit_ms"
    PROXY_CTL=$hold_ctl proxy lag-first reply 4800
    PROXY_CTL=$cont_ctl proxy lag-first request 4800
    start_holder a "$hold_uri" "$name" 9 --ttl 3s
    a=$HOLDER_PID
    wait_acquired a
    start_bg c unshare --uts sh -c 'hostname "$0" && exec "$@"' "$CONTENDER_HOST" \
      "$MONGOLOCK_BIN" -v --uri "$cont_uri" run "$name" -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 1
    c=$BG_PID
    expect_exit_code 75 "$c" c 30
    assert_not_contains "$T/c.err" "had expired; its holder's lock was purged"
    expect_exit_code 0 "$a" a 30
    check_holders 0 1
    result "round $round: holder's hello reply and contender's hello request 4.8 s late:" \
      "$(grep -o 'round trip [0-9.]*m\?s' "$T/a.err" | head -n 1) / $(grep -o 'round trip [0-9.]*m\?s' "$T/c.err" | head -n 1)," \
      "contender exit 75, holder 0, overlap ${OVERLAP_MS}ms"
  done
}

# A renewal whose outcome the holder does not know, still running on the server, written after a newer
# one (FerretDB v1 reads, then writes): stallproxy.py holds SQLite's write lock while the renewal R1 is
# read, resets the holder's side (a failed renewal), forwards a later retry Rk, releases the lock (Rk is
# written and answered first, then R1's older expiry) and partitions the holder. Its job ignores SIGTERM,
# so it runs to the kill grace. Before the fix the holder counted from Rk and its job overlapped the
# contender's by 0.7-3 s; now the lease is pinned to R1 (and R1, a findAndModify past its maxTimeMS, is
# aborted by the server): no overlap. Round 1 with the default timing, round 2 with the most aggressive
# options the validation accepts.
stalled_renewal_written_late() {
  local name a round options
  need_other_host
  server_start
  for round in 1 2; do
    name=$(lock_name "r$round")
    options=()
    ((round == 1)) || options=(--renew-interval 1s --renew-deadline 26s --kill-grace 1s)
    rm -f "$T/stall.port"
    # Hold 7 s: the retries after R1 are sent 2 s apart from R1's send time (LeaseBook::call_bound's
    # cadence, issue 27), so the one 8 s after R1 is Rk with a second to spare either way (with 8 s it
    # raced the hold, was reset, and the next retry came past the deadline: no Rk at all).
    python3 "$ITEST_DIR/stallproxy.py" "$T/stall.port" "$SERVER_PORT" "$T/db/mongolock.sqlite" 4 7 0.03 0.5 \
      2>"$T/stall$round.log" &
    track $!
    wait_until 10 test -s "$T/stall.port"
    JOB_OPTIONS=--ignore-term start_holder a "mongodb://127.0.0.1:$(cat "$T/stall.port")/" "$name" 80 \
      --ttl 30s "${options[@]}"
    a=$HOLDER_PID
    wait_acquired a
    start_contender b "$name" 1
    wait_until 40 grep -q "partition" "$T/stall$round.log"
    expect_exit_code 76 "$a" a 60
    expect_exit_code 0 "$CONTENDER_PID" b 60
    check_holders
    assert_matches "$T/a.err" "an earlier renewal's outcome is unknown"
    result "round $round (${options[*]:-default timing}): renewal stalled on the server and written after a" \
      "newer one, then a partition: overlap ${OVERLAP_MS}ms, exit a=76 b=0"
  done
}

run_case "a partition right after a renewal, with a head waiter queued: no overlap, no waiter write" \
  partition_after_a_renewal_with_a_waiter
run_case "a renewal written back late over a newer one (read-then-write server), then a partition: no overlap" \
  unknown_renewal_written_late
run_case "stopped between the insert and the spawn (two names): exit 76, the job never starts" \
  stopped_between_insert_and_spawn
run_case "an acquisition slower than the renew deadline: exit 76, the job never starts" \
  slow_acquisition_past_the_deadline
run_case "a lopsided handshake (clock estimates 2.4 s off each way) never takes over a live lock" \
  lopsided_handshake_never_takes_over_a_live_lock
run_case "a ticket renewal answered after 1 s does not count: the waiter rejoins at the back" \
  slow_ticket_renewal_rejoins_at_the_back
run_case "a renewal stalled on the server and written after a newer one, then a partition: no overlap" \
  stalled_renewal_written_late
finish
