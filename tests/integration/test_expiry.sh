#!/usr/bin/env bash
# Expired locks: status says "expired" (exit 1); takeover only after expiry plus the takeover grace
# (--grace, default 2s); the old holder's token and identity cannot touch the new holder's lock.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

acquire_as() { ml "${@:3}" acquire "$1" --process "$2" >/dev/null 2>&1; } # NAME PROCESS [GLOBAL OPTIONS]

takeover_after_ttl_and_grace() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 2s --process "$HOST:1"
  local old_token
  old_token=$(cat "$OUT")
  # Before expiry: refused, with the default grace and with a tiny one.
  expect_exit 75 -- ml acquire "$name" --process "$HOST:2"
  assert_contains "$ERR" "held by $HOST:1"
  expect_exit 75 -- ml --grace 100ms acquire "$name" --process "$HOST:2"
  # After expiry plus grace: taken over.
  wait_until 15 acquire_as "$name" "$HOST:2" --grace 100ms
  assert_held_by "$name" "$HOST:2"
  assert_contains "$OUT" "ttl: 10m"
  # Nothing of the first acquisition is left, and it can no longer touch the lock.
  expect_exit 65 -- ml release "$name" --token "$old_token"
  assert_contains "$ERR" "held by $HOST:2"
  expect_exit 65 -- ml release "$name" --process "$HOST:1"
  assert_held_by "$name" "$HOST:2"
  expect_exit 0 -- ml release "$name" --process "$HOST:2"
  assert_free "$name"
}

# While expired but within the grace, the lock is refused; status says "expired" and exits 1.
expired_within_grace_refused() {
  local name left
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 1s --process "$HOST:1"
  wait_until 10 eval "! is_held $name"
  expect_exit 1 -- ml status "$name"
  assert_contains "$OUT" "state: expired"
  assert_eq "$(status_field "$OUT" holder)" "$HOST:1" "holder of the expired lock"
  assert_matches "$OUT" '^expires: .*Z \([0-9.]+(ms|s) ago\)$'
  left=$(status_left_ms "$OUT")
  ((left <= 0)) || fail "expired lock shows ${left}ms left"
  # A grace of a minute: expired, but not purged yet.
  expect_exit 75 -- ml --grace 1m acquire "$name" --process "$HOST:2"
  assert_contains "$ERR" "held by $HOST:1"
  assert_matches "$ERR" "expired [0-9.]+(ms|s) ago"
  expect_exit 75 -- env MONGOLOCK_GRACE=1m "$MONGOLOCK_BIN" acquire "$name" --process "$HOST:2"
  expect_exit 1 -- ml status "$name"
  assert_contains "$OUT" "state: expired"
  # The document is still there until someone takes over.
  read_doc "$name"
  assert_eq "$(doc_field process)" "$HOST:1" "stored holder"
}

# The default grace is 2s: the takeover may not come sooner than 1s (ttl) + 2s after the acquire.
default_grace_is_2s() {
  local name took
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 1s --process "$HOST:1"
  read_doc "$name"
  local expires_at
  expires_at=$(doc_field expires_at)
  wait_until 20 acquire_as "$name" "$HOST:2"
  read_doc "$name"
  took=$(($(doc_field acquired_at) - expires_at))
  # (a few ms of slack: each process estimates the server's clock on its own)
  ((took >= 1950)) || fail "taken over ${took}ms after expiry; the default grace is 2s"
  assert_held_by "$name" "$HOST:2"
}

# The old holder releasing by identity after a takeover must not remove the new lock.
old_holder_cannot_release_new_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 1s --process "$HOST:1"
  wait_until 15 acquire_as "$name" "$HOST:2" --grace 100ms
  expect_exit 65 -- ml release "$name" --process "$HOST:1"
  assert_error_line "held by $HOST:2"
  assert_held_by "$name" "$HOST:2"
}

run_takes_over_expired_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 2s --process "$HOST:1"
  expect_exit 75 -- ml --grace 100ms run "$name" -- true
  wait_until 15 eval "ml --grace 100ms run $name -- touch $T/ran >/dev/null 2>&1"
  [[ -e $T/ran ]] || fail "the command did not run"
  assert_free "$name"
}

# An expired lock that nobody took over is still released by its holder.
holder_releases_expired_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 1s --process "$HOST:1"
  wait_until 10 eval "! is_held $name"
  expect_exit 0 -- ml release "$name" --process "$HOST:1"
  assert_free "$name"
}

run_case "an expired lock is taken over after TTL + grace, not before" takeover_after_ttl_and_grace
run_case "expired but within --grace: status 'expired' (1), acquire 75" expired_within_grace_refused
run_case "default takeover grace is 2s" default_grace_is_2s
run_case "after a takeover the old holder's release is refused" old_holder_cannot_release_new_lock
run_case "run takes over an expired lock" run_takes_over_expired_lock
run_case "the holder can still release its expired lock" holder_releases_expired_lock
finish
