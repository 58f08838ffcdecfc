#!/usr/bin/env bash
# Replica-set failover as MongoDB does it (issue 27): failproxy.py presents the test server as the
# primary of replica set rs0 and injects what a replica set answers during an election (the errors of
# MongoDB's fail point failCommand, a lost reply, a writeConcernError, a primary that goes silent, hello
# answered as a secondary). Each case starts its own FerretDB (faults.sh); a contender on another host
# (root: its own UTS namespace) checks that two holders never ran at once where a job runs.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"

FAILPROXY_PY=$ITEST_DIR/failproxy.py

# failproxy_start: a failproxy.py presenting the server as replica set rs0; sets FP_URI (the replica
# set's URI: retryable writes on) and FP_URI_NORETRY (retryWrites=false); `proxy COMMAND` controls it.
failproxy_start() {
  PROXY_CTL=$T/failproxy
  PROXY_LOG=$T/failproxy.log
  mkdir "$PROXY_CTL"
  python3 "$FAILPROXY_PY" serve "$T/failproxy.port" "$SERVER_PORT" "$PROXY_CTL" --rs rs0 2>"$T/failproxy.log" &
  track $!
  wait_until 10 test -s "$T/failproxy.port"
  FP_URI="mongodb://127.0.0.1:$(cat "$T/failproxy.port")/?replicaSet=rs0"
  FP_URI_NORETRY="$FP_URI&retryWrites=false"
}

# Each command's exit status and one honest line; the proxy's rules fired as they were meant to.
rule_fired() { assert_matches "$T/failproxy.log" "$1"; }

# The proxy's replica set is discovered (the driver selects it as the primary of rs0) and every command
# works through it.
replica_set_discovered() {
  local name
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml -v --uri "$FP_URI" acquire "$name"
  assert_matches "$ERR" "server 127\.0\.0\.1:[0-9]+ selected"
  local token
  token=$(cat "$OUT")
  expect_exit 0 -- ml --uri "$FP_URI" status "$name"
  expect_exit 0 -- ml --uri "$FP_URI" release "$name" --token "$token"
  expect_exit 0 -- ml --uri "$FP_URI" run "$name" -- true
}

# Default TTL (30 s: renew every 10 s, deadline 20 s): the primary stops answering (no reset) when the
# first renewal is sent, and the new primary answers 8 s later. The hung renewal is abandoned in time for
# another attempt on a new connection, which succeeds: the job runs on (exit 0) and never overlaps a
# contender's. Without the renewal call bound (main before issue 27's third round) the hung call outlived
# the renew deadline: exit 76.
silent_failover_default_ttl() {
  local name a
  name=$(lock_name)
  server_start
  failproxy_start
  start_holder a "$FP_URI" "$name" 24
  a=$HOLDER_PID
  wait_acquired a
  if unshare --uts true 2>/dev/null; then start_contender b "$name" 1; fi
  proxy blackout 8000 findAndModify:update
  expect_exit_code 0 "$a" a 60
  rule_fired "blackout: [0-9]+ open connection\(s\) silent for good, new ones answered in 8000 ms"
  assert_matches "$T/a.err" "lease renewal of '$name' failed, retrying"
  (($(renewals a) >= 2)) || fail_with "no renewal after the failover" stderr "$T/a.err"
  assert_not_matches "$T/a.err" "lease (lost|.*renew deadline)"
  if [[ -n ${CONTENDER_PID:-} ]]; then
    expect_exit_code 0 "$CONTENDER_PID" b 60
    check_holders
  fi
  result "silent failover of 8 s at a renewal (default ttl 30s): exit a=0, $(renewals a) renewals"
}

# A silent failover longer than the TTL's margin (--ttl 6s: about 1.9 s, man LIMITS; here 4 s): the lease
# is lost, the job is stopped before the lease can end (a contender on another host never overlaps it),
# mongolock exits 76, and no "retrying" is printed after "lost".
silent_failover_too_long() {
  local name a
  need_other_host
  name=$(lock_name)
  server_start
  failproxy_start
  start_holder a "$FP_URI" "$name" 30 --ttl 6s
  a=$HOLDER_PID
  wait_acquired a
  start_contender b "$name" 1 --ttl 6s
  proxy blackout 4000 findAndModify:update
  expect_exit_code 76 "$a" a 30
  expect_exit_code 0 "$CONTENDER_PID" b 60
  check_holders
  assert_matches "$T/a.err" "lease on '$name' lost"
  if sed -n "/lease on '$name' lost/,\$p" "$T/a.err" | grep -q "failed, retrying"; then
    fail_with "'retrying' after the lease was lost" stderr "$T/a.err"
  fi
  result "silent failover of 4 s at a renewal (ttl 6s): exit a=76, overlap ${OVERLAP_MS}ms"
}

# Every election error of failCommand on a renewal (TTL 6 s): each renewal fails once, the retry (a new
# connection) succeeds; the job runs to its end.
renewal_election_errors() {
  local name a code n=1
  name=$(lock_name)
  server_start
  failproxy_start
  start_holder a "$FP_URI" "$name" 16 --ttl 6s
  a=$HOLDER_PID
  wait_acquired a
  for code in 10107 11602 189 91 11600 13435; do
    wait_renewals a "$n" 20
    proxy fail findAndModify:update times 1 error "$code"
    n=$(($(renewals a) + 1))
  done
  expect_exit_code 0 "$a" a 30
  for code in 10107 11602 189 91 11600 13435; do rule_fired "findAndModify on .*: error $code"; done
  assert_matches "$T/a.err" "lease renewal of '$name' failed, retrying: .*NotWritablePrimary|failproxy"
}

# hello answers "secondary" (an election): acquire waits for a primary within --connect-timeout, and
# says "no primary" when none came.
no_primary() {
  local name start took
  name=$(lock_name)
  server_start
  failproxy_start
  proxy secondary 2500
  start=$(now_ms)
  expect_exit 0 -- ml --uri "$FP_URI" --connect-timeout 8s acquire "$name"
  took=$(($(now_ms) - start))
  ((took >= 1500)) || fail "acquire took ${took}ms: it cannot have waited for the primary"
  result "acquire during a 2.5 s election: acquired after ${took}ms"
  proxy secondary 60000
  start=$(now_ms)
  expect_exit 69 -- ml --uri "$FP_URI" --connect-timeout 2s acquire "$(lock_name other)"
  took=$(($(now_ms) - start))
  assert_error_line "no primary at"
  assert_contains "$ERR" "(RSSecondary)"
  ((took >= 1500 && took < 6000)) || fail "gave up after ${took}ms (--connect-timeout 2s)"
}

# The renew command: a renewal whose connection closed after it was sent (no retries): 69 "outcome
# unknown"; refused by election errors twice (the driver's retry too): 69, not applied.
renew_command_faults() {
  local name token
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name"
  token=$(cat "$OUT")
  proxy fail findAndModify:update times 1 close-after
  expect_exit 69 -- ml --uri "$FP_URI_NORETRY" renew "$name" --token "$token"
  assert_error_line "renewal of lock '$name' on "
  assert_contains "$ERR" "outcome unknown, the server may have applied it"
  assert_contains "$ERR" "check its expiry with 'mongolock status $name'"
  proxy fail findAndModify:update times 2 error 189
  expect_exit 69 -- ml --uri "$FP_URI" renew "$name" --token "$token"
  assert_error_line "PrimarySteppedDown"
  assert_not_contains "$ERR" "outcome unknown"
  expect_exit 0 -- ml --uri "$FP_URI" renew "$name" --token "$token"
}

# A renew whose handshake hello was held 4 s on its way to the server (red team 4, F3): its clock estimate
# reads the server's clock up to 4 s ahead. It stamps renewed_at from the estimate's lower bound, never in
# the server's future, so a second renew of the token at once is not refused, and a run whose job renews
# its own lock that way keeps its lease. Before: renewed_at ~3.5 s ahead, the second renew 65 "not by the
# given token", the run 76 "the lock document ... is gone" (3 of 3 each).
renew_after_slow_hello() {
  local name token stamp now
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name" --ttl 30s
  token=$(cat "$OUT")
  proxy fail hello,isMaster,ismaster times 1 delay 4000
  expect_exit 0 -- ml --uri "$FP_URI" renew "$name" --token "$token"
  rule_fired ": (hello|isMaster|ismaster) on .*: delay 4000"
  read_doc "$name"
  stamp=$(doc_field renewed_at)
  now=$(server_now_ms)
  ((stamp <= now)) || fail_with "renewed_at is $((stamp - now)) ms in the server's future" doc "$T/doc"
  expect_exit 0 -- ml --uri "$SERVER_URI" renew "$name" --token "$token"
  expect_exit 0 -- ml --uri "$SERVER_URI" release "$name" --token "$token"
  # The run's job renews its own lock through the slow handshake 0.5 s in; the run renews every 2 s.
  name=$(lock_name run)
  proxy fail hello,isMaster,ismaster times 1 delay 4000
  start_bg a ml -v --uri "$SERVER_URI" run "$name" --ttl 6s -- sh -c "sleep 0.5; '$MONGOLOCK_BIN' --uri '$FP_URI' \
renew '$name' --token \"\$MONGOLOCK_TOKEN\" 2>'$T/jobrenew.err'; echo \$? >'$T/jobrenew'; sleep 5"
  expect_bg_exit 0 "$BG_PID" a 40
  assert_eq "$(cat "$T/jobrenew")" 0 "the job's renew exit status"
  assert_not_matches "$T/a.err" "lost|is gone"
  (($(renewals a) >= 3)) || fail_with "too few renewals" stderr "$T/a.err"
  assert_free "$name"
}

# A release whose reply never comes (no retries): bounded by the operation timeout (10 s), then 69
# "outcome unknown".
release_reply_never_comes() {
  local name token start took
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name"
  token=$(cat "$OUT")
  proxy fail findAndModify:remove times 1 lose-reply
  start=$(now_ms)
  expect_exit 69 -- ml --uri "$FP_URI_NORETRY" release "$name" --token "$token"
  took=$(($(now_ms) - start))
  assert_error_line "outcome unknown, the server may have applied it"
  ((took < 16000)) || fail "the release took ${took}ms (operation timeout 10 s)"
  result "release whose reply never came: 69 after ${took}ms"
  assert_free "$name"
}

# A release whose delete was applied but whose connection closed before the reply (retryWrites=false:
# no retry): 69, "outcome unknown"; the retry by token: 66, "not held any more", not 65 "held by another";
# a renew by that token likewise; once another holder has the name, the token's retry is 65 naming it.
release_reply_lost() {
  local name token
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name"
  token=$(cat "$OUT")
  proxy fail findAndModify:remove times 1 close-after
  expect_exit 69 -- ml --uri "$FP_URI_NORETRY" release "$name" --token "$token"
  assert_error_line "delete of lock '$name' on "
  assert_contains "$ERR" "outcome unknown, the server may have applied it"
  assert_contains "$ERR" "check with 'mongolock status $name' whether it is still held"
  rule_fired "findAndModify on .*: close-after"
  assert_free "$name"
  expect_exit 66 -- ml --uri "$FP_URI" release "$name" --token "$token"
  assert_error_line "lock '$name' is not held any more by the given token (released, or expired)"
  expect_exit 66 -- ml --uri "$FP_URI" renew "$name" --token "$token"
  assert_error_line "lock '$name' is not held any more by the given token (released, or expired)"
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name" --process "$HOST:2"
  expect_exit 65 -- ml --uri "$FP_URI" release "$name" --token "$token"
  assert_error_line "lock '$name' is held by $HOST:2"
  expect_exit 0 -- ml --uri "$SERVER_URI" release "$name" --process "$HOST:2"
}

# A release answered with a writeConcernError (64: not retried): applied, but not confirmed by a majority:
# 69 "outcome unknown"; the retry says it is not held any more.
release_write_concern_error() {
  local name token
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name"
  token=$(cat "$OUT")
  proxy fail findAndModify:remove times 1 wce 64
  expect_exit 69 -- ml --uri "$FP_URI" release "$name" --token "$token"
  assert_error_line "outcome unknown, the server may have applied it"
  assert_free "$name"
  expect_exit 66 -- ml --uri "$FP_URI" release "$name" --token "$token"
  assert_error_line "is not held any more by the given token"
}

# A release refused with an election error: nothing was applied; the message says the delete failed
# (not "outcome unknown"), and the lock is still held.
release_election_error() {
  local name
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name" --process host-z:1
  proxy fail findAndModify:remove times 2 error 10107
  expect_exit 69 -- ml --uri "$FP_URI" release "$name" --process host-z:1
  assert_error_line "delete of lock '$name' on "
  assert_not_contains "$ERR" "outcome unknown"
  assert_not_contains "$ERR" "did not answer in time"
  assert_held_by "$name" host-z:1
}

# An acquire whose insert was applied but whose reply was lost: the driver's retryable write sends it
# again, which FerretDB (no record of retried writes) refuses as a duplicate of itself. mongolock finds
# its own insert (same _id and token) and has the lock, rather than reporting itself as the holder.
acquire_reply_lost_retried() {
  local name
  name=$(lock_name)
  server_start
  failproxy_start
  proxy fail insert times 1 close-after
  expect_exit 0 -- ml -v --uri "$FP_URI" acquire "$name" --process host-z:2
  rule_fired "insert on .*: close-after"
  assert_held_by "$name" host-z:2
}

# An acquire whose insert was applied, its reply lost, and its clean-up refused (no retries): 69 "outcome
# unknown"; the same caller's retry is told that its own identity holds it and how to free it; release
# from the same caller frees it.
acquire_orphan_same_caller() {
  local name
  name=$(lock_name)
  server_start
  failproxy_start
  proxy fail insert times 1 close-after
  proxy fail delete times 1 error 10107
  expect_exit 69 -- ml --uri "$FP_URI_NORETRY" acquire "$name" --process host-z:3
  assert_contains "$ERR" "insert of lock '$name' on "
  assert_contains "$ERR" "outcome unknown, the server may have applied it"
  assert_contains "$ERR" "could not clean up after the failed insert"
  expect_exit 75 -- ml --uri "$FP_URI" acquire "$name" --process host-z:3
  assert_contains "$ERR" "is held by this caller's own identity host-z:3"
  expect_exit 0 -- ml --uri "$FP_URI" release "$name" --process host-z:3
  assert_free "$name"
}

# The same, without --process (issue 27 item 4): the acquire records its caller's full identity (this
# shell: host, pid, boot, PID namespace, start) and leaves a note of the insert it could not clean up, so
# the same caller's retry takes its own orphan over (0, a new token) instead of naming itself as the
# holder (75). A second acquire of the same caller, whose first one succeeded, is still refused (75: a
# lock is not reentrant). Fails on main: the retry exited 75.
acquire_own_orphan_taken_over() {
  local name token
  name=$(lock_name)
  server_start
  failproxy_start
  proxy fail insert times 1 close-after
  proxy fail delete times 1 error 10107
  expect_exit 69 -- ml --uri "$FP_URI_NORETRY" acquire "$name"
  assert_contains "$ERR" "could not clean up after the failed insert"
  assert_held_by "$name" "$HOST:$BASHPID"
  expect_exit 0 -- ml --uri "$FP_URI" acquire "$name"
  assert_contains "$ERR" "lock '$name' was held by this caller's own earlier acquire, whose reply was lost and whose clean-up failed"
  token=$(cat "$OUT")
  read_doc "$name"
  assert_eq "$(doc_field token)" "$token" "the lock's token (the retry's)"
  expect_exit 75 -- ml --uri "$FP_URI" acquire "$name"
  assert_contains "$ERR" "is held by this caller's own identity $HOST:$BASHPID"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$token" "the lock's token after a second acquire"
  expect_exit 0 -- ml --uri "$FP_URI" release "$name" --token "$token"
  assert_free "$name"
}

# run: its acquire, renewals, release and history write under election errors and lost replies; it runs
# its job once, exits 0, and the lock is free afterwards.
run_under_faults() {
  local name
  name=$(lock_name)
  server_start
  failproxy_start
  # The insert refused by an election error, its retryable write's retry too: not applied (69, "failed").
  proxy fail insert times 2 error 11602
  expect_exit 69 -- ml --uri "$FP_URI" run "$name" -- true
  assert_contains "$ERR" "insert of lock '$name'"
  assert_contains "$ERR" "InterruptedDueToReplStateChange"
  assert_not_contains "$ERR" "outcome unknown"
  assert_free "$name"
  # Refused once: the driver's retry (RetryableWriteError) takes the lock; the job runs.
  proxy fail insert times 1 error 11602
  expect_exit 0 -- ml --uri "$FP_URI" run "$name" -- true
  # The history insert answered with a writeConcernError: the job ran and was released (exit 0), the
  # record's outcome is unknown and said so.
  proxy fail insert/_runs times 1 wce 64
  expect_exit 0 -- ml --uri "$FP_URI" run "$name" --ttl 3s -- sleep 2
  rule_fired "insert on .*_runs: wce 64"
  assert_contains "$ERR" "insert of the run history of '$name'"
  assert_contains "$ERR" "outcome unknown"
  assert_free "$name"
  # The release answered with a writeConcernError: applied but unconfirmed: 69, and the history is not
  # written on the word of a server that failed the release.
  proxy fail findAndModify:remove times 1 wce 64
  expect_exit 69 -- ml --uri "$FP_URI" run "$name" --ttl 3s -- sleep 2
  rule_fired "findAndModify on .*: wce 64"
  assert_contains "$ERR" "outcome unknown"
  assert_contains "$ERR" "not recorded in the history: the release failed"
  assert_not_contains "$ERR" "did not answer in time"
  assert_free "$name"
}

# acquire --wait: its queue ticket's insert refused by an election error, the driver's retry too: 69,
# "failed", no ticket; answered with a writeConcernError: 69, "outcome unknown" (the ticket may be there:
# nobody renews it, it expires on its own); refused once: the retry queues it and the waiter gets the lock.
queue_ticket_errors() {
  local name
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name" --process host-z:4 --ttl 60s
  proxy fail insert/_queue times 2 error 91
  expect_exit 69 -- ml --uri "$FP_URI" acquire "$name" --wait 10s --process host-z:5
  assert_error_line "insert of a queue ticket for '$name' on "
  assert_contains "$ERR" "ShutdownInProgress"
  assert_not_contains "$ERR" "outcome unknown"
  assert_eq "$(python3 "$ITEST_DIR/mongo.py" tickets "$name" | wc -l)" 0 "tickets left"
  proxy fail insert/_queue times 1 wce 64
  expect_exit 69 -- ml --uri "$FP_URI" acquire "$name" --wait 10s --process host-z:5
  assert_contains "$ERR" "insert of a queue ticket for '$name' on "
  assert_contains "$ERR" "outcome unknown, the server may have applied it"
  proxy fail insert/_queue times 1 error 91
  start_bg w ml --uri "$FP_URI" acquire "$name" --wait 20s --process host-z:6
  wait_until 15 eval 'python3 "$ITEST_DIR/mongo.py" tickets "$name" | grep -q " host-z:6$"'
  expect_exit 0 -- ml --uri "$SERVER_URI" release "$name" --process host-z:4
  expect_bg_exit 0 "$BG_PID" w 30
  assert_held_by "$name" host-z:6
  rule_fired "insert on .*_queue: error 91"
}

# Red team 9, F2: queued waiters gave up (69) when the server answered a failover's errors (a stepping-down
# primary's ShutdownInProgress for 2.5 s: 8 of 8 waiters; an election's NotWritablePrimary and "no primary"
# for 3-9 s: 4-7 of 8), though a waiter waits on through a failover as through a silent outage. Now both wait
# on while their --wait lasts, and each runs its command once the holder releases.
waiters_ride_out_failover_errors() {
  local name w
  name=$(lock_name)
  server_start
  failproxy_start
  expect_exit 0 -- ml --uri "$SERVER_URI" acquire "$name" --process host-z:4 --ttl 60s
  for w in 1 2; do
    start_bg "w$w" ml --uri "$FP_URI" run "$name" --wait 60s -- true
    eval "pid_w$w=\$BG_PID"
    wait_until 15 eval '(( $(python3 "$ITEST_DIR/mongo.py" tickets "$name" | wc -l) >= '"$w"' ))'
  done
  proxy fail '*' for 2500 error 91
  sleep 3.5
  proxy secondary 3000
  sleep 4
  expect_exit 0 -- ml --uri "$SERVER_URI" release "$name" --process host-z:4
  expect_bg_exit 0 "$pid_w1" w1 40
  expect_bg_exit 0 "$pid_w2" w2 40
  rule_fired "error 91"
  assert_free "$name"
}

run_case "failproxy presents the server as replica set rs0: acquire, status, release, run" replica_set_discovered
run_case "silent failover of 8 s at a renewal, default TTL: the job runs on" silent_failover_default_ttl
run_case "silent failover longer than the TTL's margin: job stopped in time, 76, no overlap" silent_failover_too_long
run_case "election errors on renewals: each retried on a new connection, the job runs on" renewal_election_errors
run_case "no primary: acquire waits for one within --connect-timeout, else 'no primary'" no_primary
run_case "renew command: reply lost 69 outcome unknown; election errors 69 not applied" renew_command_faults
run_case "renew after a slow handshake: renewed_at not in the future; the run keeps its lease" renew_after_slow_hello
run_case "release whose reply never comes: 69 outcome unknown within the operation timeout" release_reply_never_comes
run_case "release, reply lost: 69 outcome unknown; the retry by token: 66 not held any more" release_reply_lost
run_case "release with a writeConcernError: 69 outcome unknown" release_write_concern_error
run_case "release refused by an election error: 69, not applied, still held" release_election_error
run_case "acquire, reply lost, the driver's retry: the lock is ours" acquire_reply_lost_retried
run_case "acquire, reply lost, clean-up failed: the same caller's retry is told how to free it" acquire_orphan_same_caller
run_case "acquire, reply lost, clean-up failed: the same caller's retry takes its own orphan over" acquire_own_orphan_taken_over
run_case "run: acquire, release and history write under election errors" run_under_faults
run_case "acquire --wait: the queue ticket's insert under election errors and a writeConcernError" queue_ticket_errors
run_case "run --wait: queued waiters wait on through a failover's error answers (91 for 2.5 s, an election of 3 s)" waiters_ride_out_failover_errors
finish
