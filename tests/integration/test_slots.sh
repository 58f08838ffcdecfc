#!/usr/bin/env bash
# --slots N: up to N holders share a name, each in its own slot (MONGOLOCK_SLOT in run); holder N+1 is
# refused with 75 and told every holder; slots are released by token, holder or the calling shell and
# then reused; status shows each slot; '#' in a name and --slots outside 1..1000 are usage errors.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# A run holding slot $2 of lock $1 until $T/go.$3 exists; sets BG_PID; its MONGOLOCK_SLOT goes to $T/slot.$3.
start_slot_run() { # NAME SLOTS LABEL
  start_bg "$3" ml run "$1" --slots "$2" -- sh -c 'printf "%s\n" "$MONGOLOCK_SLOT" >"$1/slot.tmp.$2"; mv "$1/slot.tmp.$2" "$1/slot.$2"; while [ ! -e "$1/go.$2" ]; do sleep 0.05; done' _ "$T" "$3"
}

two_runs_share_third_refused() {
  local name p1 p2
  name=$(lock_name)
  start_slot_run "$name" 2 a
  p1=$BG_PID
  wait_file 10 "$T/slot.a"
  start_slot_run "$name" 2 b
  p2=$BG_PID
  wait_file 10 "$T/slot.b"
  assert_eq "$(cat "$T/slot.a")" "1" "MONGOLOCK_SLOT of the first run"
  assert_eq "$(cat "$T/slot.b")" "2" "MONGOLOCK_SLOT of the second run"
  expect_exit 75 -- ml run "$name" --slots 2 -- touch "$T/ran"
  [[ ! -e $T/ran ]] || fail "the third run started its command"
  assert_empty "$OUT"
  assert_contains "$ERR" "all 2 slots of lock '$name' are held: slot 1 held by "
  assert_contains "$ERR" "; slot 2 held by "
  assert_eq "$(wc -l <"$ERR")" "1" "lines of the message of a full semaphore"
  assert_matches "$ERR" "slot 1 held by $HOST:$p1 .*since [0-9T:.-]+Z, expires in"
  assert_matches "$ERR" "slot 2 held by $HOST:$p2 "
  expect_exit 75 -- ml acquire "$name" --slots 2
  assert_contains "$ERR" "slot 1 held by $HOST:$p1"
  assert_contains "$ERR" "slot 2 held by $HOST:$p2"
  # -E applies; -q silences the list.
  expect_exit 3 -- ml -q -E 3 acquire "$name" --slots 2
  assert_empty "$ERR"
  # When one run ends, its slot is free for the next.
  touch "$T/go.a"
  expect_bg_exit 0 "$p1" a
  expect_exit 0 -- ml run "$name" --slots 2 -- sh -c 'echo "$MONGOLOCK_SLOT"'
  assert_eq "$(cat "$OUT")" "1" "MONGOLOCK_SLOT of the run after slot 1 was freed"
  touch "$T/go.b"
  expect_bg_exit 0 "$p2" b
  assert_free "$name"
}

acquire_release_slots() {
  local name t1 t2
  name=$(lock_name)
  t1=$(ml acquire "$name" --slots 2 --process "$HOST:11")
  t2=$(ml acquire "$name" --slots 2 --process "$HOST:12")
  [[ $t1 =~ ^[0-9a-f]{32}$ && $t2 =~ ^[0-9a-f]{32}$ ]] || fail "tokens '$t1' '$t2'"
  expect_exit 75 -- ml acquire "$name" --slots 2 --process "$HOST:13"
  assert_contains "$ERR" "slot 1 held by $HOST:11"
  assert_contains "$ERR" "slot 2 held by $HOST:12"
  # Slot documents: program NAME for slot 1, NAME#K for slot K >= 2; name NAME, slot K.
  read_doc "$name"
  assert_eq "$(doc_field slot)" "1" "slot of slot 1"
  assert_eq "$(doc_field token)" "$t1" "token of slot 1"
  python3 "$ITEST_DIR/mongo.py" doc "$name#2" >"$T/doc" || fail "no document for slot 2"
  assert_eq "$(doc_field name)" "$name" "name of slot 2"
  assert_eq "$(doc_field slot)" "2" "slot of slot 2"
  assert_eq "$(doc_field token)" "$t2" "token of slot 2"
  # Release by token (slot 2) and by holder (slot 1); no other slot is touched.
  expect_exit 0 -- ml release "$name" --token "$t2"
  assert_empty "$ERR"
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "holder: $HOST:11"
  assert_not_contains "$OUT" "holder: $HOST:12"
  expect_exit 65 -- ml release "$name" --token "$t2"
  expect_exit 65 -- ml release "$name" --process "$HOST:13"
  expect_exit 0 -- ml release "$name" --process "$HOST:11"
  assert_free "$name"
  python3 "$ITEST_DIR/mongo.py" doc "$name" >/dev/null && fail "slot 1 is still stored"
  true
}

# The calling shell holds a slot and releases it without naming it.
shell_releases_its_slot() {
  local name
  name=$(lock_name)
  ml acquire "$name" --slots 3 --process "$HOST:11" >/dev/null
  ml acquire "$name" --slots 3 >/dev/null # this shell: slot 2
  expect_exit 0 -- ml status "$name"
  assert_contains "$OUT" "holder: $HOST:$BASHPID"
  expect_exit 0 -- ml release "$name"
  expect_exit 0 -- ml status "$name"
  assert_not_contains "$OUT" "holder: $HOST:$BASHPID"
  assert_contains "$OUT" "holder: $HOST:11"
}

status_shows_slots() {
  local name
  name=$(lock_name)
  ml acquire "$name" --slots 2 --process "$HOST:11" >/dev/null
  ml acquire "$name" --slots 2 --process "$HOST:12" >/dev/null
  expect_exit 0 -- ml status "$name"
  assert_empty "$ERR"
  # Two blocks: name, slot, state, holder ...
  assert_eq "$(grep -c "^name: $name$" "$OUT")" "2" "name lines"
  assert_eq "$(sed -n 's/^slot: //p' "$OUT" | tr '\n' ' ')" "1 2 " "slot lines"
  assert_eq "$(grep -c '^state: held$' "$OUT")" "2" "state lines"
  assert_eq "$(sed -n 's/^holder: //p' "$OUT" | tr '\n' ' ')" "$HOST:11 $HOST:12 " "holders"
  # One slot free: still held.
  ml release "$name" --process "$HOST:11"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(sed -n 's/^slot: //p' "$OUT")" "2" "slot left"
}

# A slot whose holder's lease expired is taken over like a plain lock.
expired_slot_taken_over() {
  local name
  name=$(lock_name)
  ml acquire "$name" --slots 2 --process "$HOST:11" >/dev/null
  ml acquire "$name" --slots 2 --ttl 1s --process "$HOST:12" >/dev/null
  expect_exit 0 -- ml --grace 100ms acquire "$name" --slots 2 --process "$HOST:13" --wait 15s
  assert_contains "$ERR" "'$name#2' had expired"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(sed -n 's/^holder: //p' "$OUT" | tr '\n' ' ')" "$HOST:11 $HOST:13 " "holders"
}

one_slot_is_a_plain_lock() {
  local name
  name=$(lock_name)
  expect_exit 0 -- ml run "$name" --slots 1 -- sh -c 'echo "${MONGOLOCK_SLOT-unset}"'
  assert_eq "$(cat "$OUT")" "unset" "MONGOLOCK_SLOT with --slots 1"
  expect_exit 0 -- env MONGOLOCK_SLOT=7 "$MONGOLOCK_BIN" run "$name" -- sh -c 'echo "${MONGOLOCK_SLOT-unset}"'
  assert_eq "$(cat "$OUT")" "unset" "inherited MONGOLOCK_SLOT without --slots"
  ml acquire "$name" --slots 1 --process "$HOST:11" >/dev/null
  read_doc "$name"
  assert_eq "$(doc_field program)" "$name" "program with --slots 1"
  expect_exit 75 -- ml acquire "$name" --process "$HOST:12"
}

hash_in_name_refused() {
  expect_exit 64 -- ml acquire "a#1" --slots 2
  assert_error_line "'#'"
  expect_exit 64 -- ml acquire "a#1"
  expect_exit 64 -- ml run "a#1" -- touch "$T/ran"
  expect_exit 64 -- ml run ok "a#" -- touch "$T/ran"
  expect_exit 64 -- ml status "#"
  expect_exit 64 -- ml release "a#1"
  expect_exit 64 -- ml renew "a#1"
  [[ ! -e $T/ran ]] || fail "run started its command"
}

bad_slot_counts() {
  local name n
  name=$(lock_name)
  for n in 0 -1 1001 two 1.5 ""; do
    expect_exit 64 -- ml acquire "$name" --slots "$n"
    expect_exit 64 -- ml run "$name" --slots "$n" -- touch "$T/ran"
  done
  expect_exit 64 -- ml acquire "$name" --slots 0
  assert_error_line "--slots 0 is out of range"
  [[ ! -e $T/ran ]] || fail "run started its command"
  assert_free "$name"
  expect_exit 0 -- ml acquire "$name" --slots 1000 --process "$HOST:11"
}

# Slot 1 is the plain name: a plain lock and a semaphore of the same name exclude each other there.
plain_lock_is_slot_1() {
  local name
  name=$(lock_name)
  ml acquire "$name" --slots 2 --process "$HOST:11" >/dev/null
  ml acquire "$name" --slots 2 --process "$HOST:12" >/dev/null
  expect_exit 75 -- ml acquire "$name" --process "$HOST:13"
  assert_contains "$ERR" "$HOST:11"
  ml release "$name" --process "$HOST:12"
  # Slot 2 free, slot 1 still held: a plain acquire is still refused.
  expect_exit 75 -- ml acquire "$name" --process "$HOST:13"
  # A plain holder occupies slot 1 of a semaphore.
  local other
  other=$(lock_name other)
  ml acquire "$other" --process "$HOST:11" >/dev/null
  expect_exit 0 -- ml run "$other" --slots 2 -- sh -c 'echo "$MONGOLOCK_SLOT"'
  assert_eq "$(cat "$OUT")" "2" "slot of a semaphore holder next to a plain holder"
}

run_case "--slots 2: two runs get slots 1 and 2; the third gets 75 and the holders" two_runs_share_third_refused
run_case "acquire --slots; release by --token and --process" acquire_release_slots
run_case "the calling shell releases its own slot" shell_releases_its_slot
run_case "status NAME shows every slot" status_shows_slots
run_case "an expired slot is taken over" expired_slot_taken_over
run_case "--slots 1 is a plain lock" one_slot_is_a_plain_lock
run_case "slot 1 is the plain name: a plain lock and slot 1 exclude each other" plain_lock_is_slot_1
run_case "'#' in a name: 64" hash_in_name_refused
run_case "--slots 0, -1, 1001, non-numbers: 64" bad_slot_counts
finish
