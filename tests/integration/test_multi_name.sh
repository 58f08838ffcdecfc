#!/usr/bin/env bash
# run a b c -- CMD takes every name or none: all held while CMD runs (MONGOLOCK_NAME / MONGOLOCK_TOKEN
# list them newline-separated in sorted order); one name held elsewhere refuses the run (75) and leaves
# none of the others held; --wait succeeds once the blocker releases; duplicate names are collapsed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

HOLDER="$HOST:4242" # a holder identity other than any caller here

# Three lock names "<prefix>-a", "-b", "-c" in A, B, C (sorted order a < b < c).
three_names() {
  local base
  base=$(lock_name multi)
  A=$base-a
  B=$base-b
  C=$base-c
}

# Waits until the background run with $T/started exists.
STAY='printf "%s\n" "$MONGOLOCK_NAME" >"$1/names"; printf "%s\n" "$MONGOLOCK_TOKEN" >"$1/tokens"; touch "$1/started"; while [ ! -e "$1/go" ]; do sleep 0.05; done'

takes_all_three() {
  three_names
  # Given out of order: taken and exported in sorted order.
  start_bg run ml run "$C" "$A" "$B" -- sh -c "$STAY" _ "$T"
  local pid=$BG_PID
  wait_file 10 "$T/started"
  assert_held_by "$A" "$HOST:$pid"
  assert_held_by "$B" "$HOST:$pid"
  assert_held_by "$C" "$HOST:$pid"
  assert_eq "$(cat "$T/names")" "$(printf '%s\n' "$A" "$B" "$C")" "MONGOLOCK_NAME"
  local tokens=() n
  mapfile -t tokens <"$T/tokens"
  assert_eq "${#tokens[@]}" "3" "number of MONGOLOCK_TOKEN lines"
  for n in 0 1 2; do
    local name=("$A" "$B" "$C")
    read_doc "${name[n]}"
    assert_eq "${tokens[n]}" "$(doc_field token)" "token $((n + 1)) of MONGOLOCK_TOKEN"
  done
  # Each name refuses others while the run holds it.
  expect_exit 75 -- ml acquire "$B"
  assert_contains "$ERR" "held by $HOST:$pid"
  expect_exit 75 -- ml run "$C" -- true
  touch "$T/go"
  expect_bg_exit 0 "$pid" run
  assert_empty "$T/run.err"
  assert_free "$A"
  assert_free "$B"
  assert_free "$C"
}

# held_elsewhere_refused NAME-INDEX: the run is refused and neither other name is left held.
refused_when_one_is_held() {
  local blocked=$1 others=() n
  three_names
  local names=("$A" "$B" "$C")
  ml acquire "${names[blocked]}" --process "$HOLDER" >"$T/token"
  for n in 0 1 2; do ((n == blocked)) || others+=("${names[n]}"); done
  expect_exit 75 -- ml run "$A" "$B" "$C" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command although '${names[blocked]}' was held"
  assert_empty "$OUT"
  assert_contains "$ERR" "lock '${names[blocked]}' is held by $HOLDER"
  # Immediately after: the others are free (no document left), the blocker's lock untouched.
  expect_exit 1 -- ml status "${others[0]}"
  expect_exit 1 -- ml status "${others[1]}"
  assert_free "${others[0]}"
  assert_free "${others[1]}"
  assert_held_by "${names[blocked]}" "$HOLDER"
  read_doc "${names[blocked]}"
  assert_eq "$(doc_field token)" "$(cat "$T/token")" "token of the blocker's lock"
  # -E applies to multi-name runs too.
  expect_exit 3 -- ml -E 3 run "$C" "$B" "$A" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command"
  assert_free "${others[0]}"
  assert_free "${others[1]}"
}

succeeds_with_wait_after_release() {
  three_names
  ml acquire "$C" --process "$HOLDER" >/dev/null
  start_bg run ml -v run "$A" "$B" "$C" --wait 30s -- sh -c "$STAY" _ "$T"
  local pid=$BG_PID
  wait_until 10 grep -q "trying again" "$T/run.err"
  [[ ! -e $T/started ]] || fail "the command started while '$C' was held"
  expect_exit 0 -- ml release "$C" --process "$HOLDER"
  wait_file 15 "$T/started"
  assert_held_by "$A" "$HOST:$pid"
  assert_held_by "$B" "$HOST:$pid"
  assert_held_by "$C" "$HOST:$pid"
  touch "$T/go"
  expect_bg_exit 0 "$pid" run
  assert_free "$A"
  assert_free "$B"
  assert_free "$C"
}

# While waiting for the last name, the run does not keep the first ones: an acquirer that does not wait
# (and so does not queue behind the run) can take them between attempts.
waiting_run_does_not_hoard() {
  three_names
  ml acquire "$C" --process "$HOLDER" >/dev/null
  start_bg run ml -v run "$A" "$B" "$C" --wait 30s -- touch "$T/ran"
  local pid=$BG_PID
  wait_until 10 grep -q "trying again" "$T/run.err"
  expect_exit 0 -- ml acquire "$A" --process "$HOST:5"
  expect_exit 0 -- ml release "$C" --process "$HOLDER"
  # Now the run waits for A.
  sleep 1
  [[ ! -e $T/ran ]] || fail "the run started while '$A' was held by another"
  expect_exit 0 -- ml release "$A" --process "$HOST:5"
  expect_bg_exit 0 "$pid" run
  [[ -e $T/ran ]] || fail "the run did not start its command"
}

duplicates_collapsed() {
  three_names
  expect_exit 0 -- ml run "$B" "$A" "$B" "$A" -- sh -c 'printf "%s\n" "$MONGOLOCK_NAME"; printf "%s\n" "$MONGOLOCK_TOKEN" | wc -l'
  assert_eq "$(cat "$OUT")" "$(printf '%s\n' "$A" "$B" 2)" "MONGOLOCK_NAME and token count"
  assert_empty "$ERR"
  assert_free "$A"
  assert_free "$B"
  # A duplicate of a single name is just that name.
  expect_exit 0 -- ml run "$C" "$C" -- sh -c 'printf "%s\n" "$MONGOLOCK_NAME"'
  assert_eq "$(cat "$OUT")" "$C" "MONGOLOCK_NAME of 'run c c'"
}

# One bad name refuses the whole run before anything is taken.
bad_name_refuses_all() {
  three_names
  expect_exit 64 -- ml run "$A" "bad#name" "$C" -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "run started its command"
  expect_exit 64 -- ml run "$A" "" -- touch "$T/ran"
  assert_free "$A"
  assert_free "$C"
}

# Losing the lease of one name ends the run with 76; the names whose leases it still held are released,
# not left blocking others until they expire.
lost_lease_releases_the_others() {
  three_names
  start_bg run ml run "$A" "$B" --ttl 30s -- sh -c "$STAY" _ "$T"
  local pid=$BG_PID
  wait_file 10 "$T/started"
  expect_exit 0 -- ml break "$B" --force
  expect_bg_exit 76 "$pid" run 30
  assert_contains "$T/run.err" "lost"
  expect_exit 1 -- ml status "$A"
}

# The command of `run a b` may not free its locks, but a release of a with b's token is not one: it frees
# nothing and answers as outside a run (65: a is held by another token), not 64 (red team 6, F6: the guard
# paired any listed name with any listed token).
own_guard_pairs_names_with_tokens() {
  three_names
  expect_exit 0 -- ml run "$A" "$B" -- sh -c '
    set -- $MONGOLOCK_NAME; a=$1
    set -- $MONGOLOCK_TOKEN; ta=$1; tb=$2
    "$MONGOLOCK_BIN" release "$a" --token "$tb" 2>/dev/null; echo "$?"
    "$MONGOLOCK_BIN" release "$a" --token "$ta" 2>/dev/null; echo "$?"'
  assert_eq "$(cat "$OUT")" "$(printf '%s\n' 65 64)" "release a with b's token, with a's own"
  assert_free "$A"
  assert_free "$B"
}

run_case "run c a b -- CMD holds all three; MONGOLOCK_NAME/TOKEN sorted, newline-separated" takes_all_three
run_case "first name held elsewhere: 75, the others not left held" refused_when_one_is_held 0
run_case "middle name held elsewhere: 75, the others not left held" refused_when_one_is_held 1
run_case "last name held elsewhere: 75, the first two rolled back" refused_when_one_is_held 2
run_case "--wait: succeeds once the blocker releases" succeeds_with_wait_after_release
run_case "--wait: the waiting run does not hold the other names" waiting_run_does_not_hoard
run_case "duplicate names are collapsed" duplicates_collapsed
run_case "one bad name refuses the whole run (64)" bad_name_refuses_all
run_case "a lost lease on one name: 76, the other names released" lost_lease_releases_the_others
run_case "the command's release of one name with another's token: 65, not the guard's 64" own_guard_pairs_names_with_tokens
finish
