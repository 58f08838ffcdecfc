#!/usr/bin/env bash
# The queue's wake-up events when the server refuses the event's insert: failproxy.py between the releasing
# client and the test server answers the insert into the events collection with the error FerretDB v1's
# SQLite backend gives while another client's tailable cursor reads that database ("database is locked
# (517)", docs/compatibility.md). The waiters connect to the server directly.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

source "$ITEST_DIR/failproxy.sh"
HOLDER="$HOST:4343" # a holder identity other than any caller here
SQLITE_LOCKED='[msg_insert.go:168 handler.(*Handler).MsgInsert] [collection.go:135 sqlite.(*collection).InsertAll.func1] database is locked (517)'

# queued_head NAME: NAME held by $HOLDER, and a waiting run (label head, -v; its job touches $T/ran) first in
# its queue; sets HEAD_PID.
queued_head() {
  ml acquire "$1" --process "$HOLDER" --ttl 10m >/dev/null
  start_bg head ml -v run "$1" --wait 60s -- touch "$T/ran"
  HEAD_PID=$BG_PID
  wait_until 10 grep -q "first in the queue" "$T/head.err"
}

# A release whose wake-up event is refused `times` times with 517 still wakes the head through the event
# (the insert is sent again: nothing was written), with no warning; the proxy saw every refused insert.
locked_events_db_is_retried() {
  local times=$1 name pid
  name=$(lock_name)
  failproxy_start
  queued_head "$name"
  pid=$HEAD_PID
  expect_exit 0 -- ml -v renew "$name" --process "$HOLDER" --ttl 10m # the holder marks its lock
  assert_contains "$ERR" "marked lock '$name'"
  proxy fail insert/_events times "$times" error 1 msg "$SQLITE_LOCKED"
  expect_exit 0 -- env MONGOLOCK_DEBUG_COMMANDS=1 "$MONGOLOCK_BIN" --uri "$FP_URI" release "$name" --process "$HOLDER"
  assert_not_contains "$ERR" "could not wake"
  # The count tells the refused sends apart: the release (by holder: the read of the lock, then its delete by
  # _id), the event, and the event's resends.
  assert_contains "$ERR" "server commands: $((4 + times)) (endSessions 1, find 1, findAndModify 1, insert $((1 + times)); resent: insert $times)"
  assert_commands "$ERR" "4 (endSessions 1, find 1, findAndModify 1, insert 1)"
  [[ $(grep -c "insert on .*_events: error 1" "$T/failproxy.log") == "$times" ]] ||
    fail_with "expected $times refused event inserts" log "$T/failproxy.log"
  expect_bg_exit 0 "$pid" head
  assert_contains "$T/head.err" "woken by a release of '$name'"
  [[ -e $T/ran ]] || fail "the head did not run its command"
}

# Refused more often than the retries allow: the release still exits 0 (the lock is free) and says in one
# line that the waiters notice on their own; the head still takes the lock (by its own poll).
locked_events_db_gives_up() {
  local name pid
  name=$(lock_name)
  failproxy_start
  queued_head "$name"
  pid=$HEAD_PID
  expect_exit 0 -- ml -v renew "$name" --process "$HOLDER" --ttl 10m
  proxy fail insert/_events times 100 error 1 msg "$SQLITE_LOCKED"
  expect_exit 0 -- ml --uri "$FP_URI" release "$name" --process "$HOLDER"
  assert_contains "$ERR" "could not wake the waiters of '$name'"
  [[ $(grep -c "warning\|error" "$ERR") == 1 ]] || fail_with "expected one line" stderr "$ERR"
  expect_bg_exit 0 "$pid" head
  [[ -e $T/ran ]] || fail "the head did not run its command"
}

# A run held 150 ms or more appends a wake-up event at its release even with no waiter known (one may have
# joined after its last look at the queue). When that event fails, no waiter may exist and the waiters' own
# checks find the free lock: not a warning (a -v line), and exit 0 (stop 4's CI: suites without waiters
# failed on this warning when FerretDB SQLite refused the events collection's creation).
unmarked_event_failure_is_quiet() {
  local name
  name=$(lock_name)
  failproxy_start
  proxy fail insert/_events times 100 error 1 msg "$SQLITE_LOCKED"
  expect_exit 0 -- ml --uri "$FP_URI" run "$name" -- sleep 0.3
  assert_empty "$ERR"
  grep -q "insert on .*_events: error 1" "$T/failproxy.log" || fail_with "no event insert was refused" log "$T/failproxy.log"
  expect_exit 0 -- ml -v --uri "$FP_URI" run "$name" -- sleep 0.3
  assert_contains "$ERR" "could not append the wake-up event of '$name' for a waiter that may have joined"
  assert_free "$name"
}

# The first release that wakes waiters (a run held 150 ms or more) before any waiter created the capped events
# collection makes it by its insert: a plain collection, which no tailable cursor can follow, so every waiter
# after it polled for good. The first waiter that meets it drops it and creates it capped; the head is then
# woken by the release's event.
uncapped_events_collection_is_repaired() {
  local name pid
  name=$(lock_name)
  # Collections of this case's own: the suite's events collection was made capped by the cases before.
  export MONGOLOCK_COLLECTION=${MONGOLOCK_COLLECTION}_plain
  trap 'python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true' EXIT
  expect_exit 0 -- ml run "$name" -- sleep 0.3 # the events collection made by the release's insert
  queued_head "$name"
  pid=$HEAD_PID
  assert_contains "$T/head.err" "the wake-up events collection was not capped"
  assert_not_contains "$T/head.err" "no push wake-ups"
  expect_exit 0 -- ml -v renew "$name" --process "$HOLDER" --ttl 10m # the holder marks its lock
  expect_exit 0 -- ml release "$name" --process "$HOLDER"
  expect_bg_exit 0 "$pid" head
  assert_contains "$T/head.err" "woken by a release of '$name'"
}

run_case "a wake-up event refused once with 'database is locked (517)' is sent again: the head is woken" \
  locked_events_db_is_retried 1
run_case "... refused three times: sent a fourth time, the head is woken" locked_events_db_is_retried 3
run_case "... refused every time: the release exits 0 with one line, the head takes the lock by its poll" \
  locked_events_db_gives_up
run_case "an events collection a release made before any waiter (not capped) is made capped again" \
  uncapped_events_collection_is_repaired
run_case "a run's release with no waiter known: a refused wake-up event is a -v line, not a warning" \
  unmarked_event_failure_is_quiet
finish
