#!/usr/bin/env bash
# A held lock: a second acquire is refused (75, -E, -q); a release by a non-holder is refused (65) and
# the lock survives; double release and release of a lock never taken are refused (65; 66 by the token of
# the lock just released: not held any more, issue 27).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOLDER="$HOST:4242" # a holder identity other than any caller here

# A lock held by $HOLDER; prints its name. Its token is in $T/token.
held_lock() {
  local name
  name=$(lock_name "$@")
  ml acquire "$name" --process "$HOLDER" >"$T/token"
  echo "$name"
}

second_acquire_refused() {
  local name
  name=$(held_lock)
  expect_exit 75 -- ml acquire "$name"
  assert_empty "$OUT"
  assert_contains "$ERR" "lock '$name' is held by $HOLDER"
  assert_matches "$ERR" "since [0-9T:.-]+Z, expires in [0-9]"
  [[ $(wc -l <"$ERR") == 1 ]] || fail_with "expected one line on stderr" stderr "$ERR"
  # Another --process, and `run`, are refused the same way; run does not start its command.
  expect_exit 75 -- ml acquire "$name" --process "$HOST:1"
  assert_contains "$ERR" "held by $HOLDER"
  expect_exit 75 -- ml run "$name" -- touch "$T/ran"
  assert_contains "$ERR" "held by $HOLDER"
  [[ ! -e $T/ran ]] || fail "run started its command although the lock was held"
  assert_held_by "$name" "$HOLDER"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$(cat "$T/token")" "token of the stored lock"
}

# The holder itself acquiring again is refused too: a lock is not reentrant.
same_holder_acquire_refused() {
  local name
  name=$(held_lock)
  expect_exit 75 -- ml acquire "$name" --process "$HOLDER"
  assert_contains "$ERR" "held by $HOLDER"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$(cat "$T/token")" "token of the stored lock"
}

conflict_exit_code_option() {
  local name
  name=$(held_lock)
  expect_exit 3 -- ml -E 3 acquire "$name"
  assert_contains "$ERR" "held by $HOLDER"
  expect_exit 3 -- ml --conflict-exit-code 3 acquire "$name"
  expect_exit 3 -- ml --conflict-exit-code=3 acquire "$name"
  expect_exit 9 -- ml -E 9 run "$name" -- true
  expect_exit 3 -- env MONGOLOCK_CONFLICT_EXIT_CODE=3 "$MONGOLOCK_BIN" acquire "$name"
  assert_contains "$ERR" "held by $HOLDER"
  # The option wins over the environment.
  expect_exit 4 -- env MONGOLOCK_CONFLICT_EXIT_CODE=3 "$MONGOLOCK_BIN" -E 4 acquire "$name"
  # -E changes nothing else: success is still 0.
  local free
  free=$(lock_name free)
  expect_exit 0 -- ml -E 3 acquire "$free"
  expect_exit 0 -- ml release "$free"
  assert_held_by "$name" "$HOLDER"
}

quiet_silences_the_conflict() {
  local name
  name=$(held_lock)
  expect_exit 75 -- ml -q acquire "$name"
  assert_empty "$ERR"
  assert_empty "$OUT"
  expect_exit 75 -- ml --quiet run "$name" -- true
  assert_empty "$ERR"
  expect_exit 75 -- env MONGOLOCK_QUIET=1 "$MONGOLOCK_BIN" acquire "$name"
  assert_empty "$ERR"
  # -q keeps errors: a refused release still explains itself.
  expect_exit 65 -- ml -q release "$name" --process "$HOST:1"
  assert_contains "$ERR" "mongolock: error: "
}

release_by_other_process_refused() {
  local name
  name=$(held_lock)
  expect_exit 65 -- ml release "$name" --process "$HOST:1"
  assert_error_line "lock '$name' is held by $HOLDER"
  assert_contains "$ERR" "not by $HOST:1"
  assert_contains "$ERR" "nothing was released"
  assert_empty "$OUT"
  assert_held_by "$name" "$HOLDER"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$(cat "$T/token")" "token of the surviving lock"
}

release_by_calling_shell_refused() {
  local name
  name=$(held_lock)
  expect_exit 65 -- ml release "$name"
  assert_error_line "held by $HOLDER"
  assert_contains "$ERR" "not by $HOST:$BASHPID"
  assert_held_by "$name" "$HOLDER"
}

release_with_wrong_token_refused() {
  local name
  name=$(held_lock)
  expect_exit 65 -- ml release "$name" --token 0123456789abcdef0123456789abcdef
  assert_error_line "lock '$name' is held by $HOLDER"
  assert_contains "$ERR" "nothing was released"
  assert_held_by "$name" "$HOLDER"
  # The right token with --process of someone else: the token decides.
  expect_exit 0 -- ml release "$name" --token "$(cat "$T/token")" --process "$HOST:1"
  assert_free "$name"
}

# Another lock's token does not release this one.
release_with_token_of_other_lock_refused() {
  local name other
  name=$(held_lock a)
  other=$(lock_name b)
  expect_exit 0 -- ml acquire "$other" --process "$HOLDER"
  expect_exit 65 -- ml release "$name" --token "$(cat "$OUT")"
  assert_held_by "$name" "$HOLDER"
  assert_held_by "$other" "$HOLDER"
}

double_release_refused() {
  local name
  name=$(held_lock)
  expect_exit 0 -- ml release "$name" --process "$HOLDER"
  expect_exit 65 -- ml release "$name" --process "$HOLDER"
  assert_error_line "lock '$name' is not held; nothing was released"
  # By the token of the lock just released: not held any more, nobody else holds it (66, issue 27).
  expect_exit 66 -- ml release "$name" --token "$(cat "$T/token")"
  assert_error_line "lock '$name' is not held any more by the given token (released, or expired) and nobody holds it"
  assert_free "$name"
}

release_never_taken_refused() {
  local name
  name=$(lock_name never)
  expect_exit 65 -- ml release "$name"
  assert_error_line "lock '$name' is not held; nothing was released"
  expect_exit 65 -- ml release "$name" --process "$HOLDER"
  assert_error_line "is not held"
  assert_free "$name"
}

run_case "a second acquire gets 75 and names the holder" second_acquire_refused
run_case "the holder acquiring again gets 75 (not reentrant)" same_holder_acquire_refused
run_case "-E / --conflict-exit-code / MONGOLOCK_CONFLICT_EXIT_CODE change the conflict code" conflict_exit_code_option
run_case "-q silences the conflict message" quiet_silences_the_conflict
run_case "release --process of a non-holder: 65, holder named, lock kept" release_by_other_process_refused
run_case "release by a shell that is not the holder: 65, lock kept" release_by_calling_shell_refused
run_case "release with a wrong token: 65, lock kept" release_with_wrong_token_refused
run_case "release with another lock's token: 65" release_with_token_of_other_lock_refused
run_case "double release: 65 'not held'" double_release_refused
run_case "release of a lock never taken: 65 'not held'" release_never_taken_refused
finish
