#!/usr/bin/env bash
# --min-hold: a release before acquired_at + DUR keeps the lock until then (state released, others
# refused), a second release is refused, and after the hold (+ takeover grace) the name is free again;
# the same for run; a release after the hold deletes the lock as usual.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOLDER="$HOST:4242" # a holder identity other than any caller here

acquire_release_within_hold() {
  local name hold_until
  name=$(lock_name)
  ml acquire "$name" --min-hold 3s --process "$HOLDER" >"$T/token"
  read_doc "$name"
  hold_until=$(doc_field hold_until)
  assert_eq "$((hold_until - $(doc_field acquired_at)))" "3000" "hold_until - acquired_at"
  expect_exit 0 -- ml release "$name" --process "$HOLDER"
  assert_empty "$OUT"
  assert_contains "$ERR" "lock '$name' released; it stays held until "
  # The document stays, marked released, and expires at the end of the hold.
  read_doc "$name"
  [[ -n $(doc_field released_at) ]] || fail "released_at is not set: $(tr '\n' ' ' <"$T/doc")"
  assert_eq "$(doc_field expires_at)" "$hold_until" "expires_at after the release"
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "state: released"
  assert_contains "$OUT" "minimum hold until: "
  assert_contains "$OUT" "released: "
  # Others are refused during the hold.
  expect_exit 75 -- ml --grace 100ms acquire "$name"
  assert_contains "$ERR" "kept for its minimum hold"
  local refused_at
  refused_at=$(server_now_ms)
  ((refused_at < hold_until)) || fail "the check ran after the hold ended (machine too slow?)"
  expect_exit 75 -- ml --grace 100ms run "$name" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command during the minimum hold"
  # After the hold and the grace, the name is free again.
  expect_exit 0 -- ml --grace 100ms acquire "$name" --wait 15s --process "$HOST:5"
  assert_held_by "$name" "$HOST:5"
  read_doc "$name"
  (($(doc_field acquired_at) >= hold_until + 100)) ||
    fail "taken over at $(doc_field acquired_at), before the hold ended at $hold_until + grace 100ms"
}

double_release_refused() {
  local name
  name=$(lock_name)
  ml acquire "$name" --min-hold 1m --process "$HOLDER" >"$T/token"
  expect_exit 0 -- ml release "$name" --process "$HOLDER"
  expect_exit 65 -- ml release "$name" --process "$HOLDER"
  assert_error_line "lock '$name' was already released at"
  assert_contains "$ERR" "nothing was released"
  expect_exit 66 -- ml release "$name" --token "$(cat "$T/token")"
  assert_error_line "already released"
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "state: released"
}

# A release once the hold is over deletes the lock at once, with no message.
release_after_hold_deletes() {
  local name hold_until
  name=$(lock_name)
  ml acquire "$name" --min-hold 1s --process "$HOLDER" >/dev/null
  read_doc "$name"
  hold_until=$(doc_field hold_until)
  wait_until 10 eval '(($(server_now_ms) > hold_until))'
  expect_exit 0 -- ml release "$name" --process "$HOLDER"
  assert_empty "$ERR"
  assert_free "$name"
}

run_min_hold_blocks_second_run() {
  local name hold_until
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --min-hold 3s -- true
  assert_contains "$ERR" "lock '$name' stays held until"
  read_doc "$name"
  hold_until=$(doc_field hold_until)
  expect_exit 75 -- ml --grace 100ms run "$name" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "the second run started its command during the minimum hold"
  assert_contains "$ERR" "kept for its minimum hold"
  ((($(server_now_ms)) < hold_until)) || fail "the check ran after the hold ended (machine too slow?)"
  expect_exit 0 -- ml --grace 100ms run "$name" --wait 15s -- touch "$T/ran"
  [[ -e $T/ran ]] || fail "the later run did not start its command"
  assert_free "$name"
}

# A command that outlasts the minimum hold releases the lock as usual.
run_longer_than_hold() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --min-hold 1s -- sleep 1.5
  assert_empty "$ERR"
  assert_free "$name"
}

# The minimum hold with -q: the release message is silenced, the lock still kept.
quiet_release() {
  local name
  name=$(lock_name)
  ml acquire "$name" --min-hold 1m --process "$HOLDER" >/dev/null
  expect_exit 0 -- ml -q release "$name" --process "$HOLDER"
  assert_empty "$ERR"
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "state: released"
}

# A minimum hold longer than the TTL: a release after the lease ran out deletes the lock instead of
# reviving it until hold_until.
no_revival_after_expiry() {
  local name
  name=$(lock_name)
  ml acquire "$name" --ttl 1s --min-hold 1m --process "$HOLDER" >/dev/null
  wait_until 10 is_free "$name"
  expect_exit 0 -- ml release "$name" --process "$HOLDER"
  assert_not_contains "$ERR" "stays held"
  assert_free "$name"
  expect_exit 0 -- ml acquire "$name" --process "$HOST:5"
}

bad_min_hold() {
  local name
  name=$(lock_name)
  expect_exit 64 -- ml acquire "$name" --min-hold 3
  assert_error_line "--min-hold"
  expect_exit 64 -- ml run "$name" --min-hold -1s -- true
  assert_error_line "--min-hold"
  assert_free "$name"
}

run_case "acquire --min-hold 3s, release: kept (state released), others refused, free after the hold" acquire_release_within_hold
run_case "double release during the hold: 65 'already released'" double_release_refused
run_case "release after the hold deletes the lock" release_after_hold_deletes
run_case "run --min-hold 3s -- true: a second run is refused, a later one allowed" run_min_hold_blocks_second_run
run_case "run longer than --min-hold releases as usual" run_longer_than_hold
run_case "-q silences the minimum-hold release message" quiet_release
run_case "--min-hold longer than --ttl: a release after expiry does not revive the lock" no_revival_after_expiry
run_case "bad --min-hold: 64" bad_min_hold
finish
