#!/usr/bin/env bash
# --fence: acquire prints "TOKEN FENCE"; the fence of a name grows by one with each fenced acquisition
# (across release, expiry takeover and break), names count independently; run exports MONGOLOCK_FENCE as
# stored; concurrent acquisitions never get the same fence.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The fencing tokens live in their own collection, which the harness does not drop.
trap 'MONGOLOCK_COLLECTION=${MONGOLOCK_COLLECTION}_fences python3 "$ITEST_DIR/mongo.py" drop >/dev/null 2>&1 || true
  cleanup_suite' EXIT

# acquire_fenced NAME [ARGS...]: acquire --fence in this shell; checks the "TOKEN FENCE" line and sets
# TOKEN and FENCE.
acquire_fenced() {
  local line
  ml acquire "$@" --fence >"$T/acquire.out" 2>"$T/acquire.err" ||
    fail_with "acquire --fence $* failed" stderr "$T/acquire.err"
  [[ $(wc -l <"$T/acquire.out") == 1 ]] || fail_with "acquire --fence printed more than one line" stdout "$T/acquire.out"
  line=$(cat "$T/acquire.out")
  [[ $line =~ ^([0-9a-f]{32})\ ([0-9]+)$ ]] || fail "acquire --fence printed '$line', not 'TOKEN FENCE'"
  TOKEN=${BASH_REMATCH[1]}
  FENCE=${BASH_REMATCH[2]}
}

grows_across_release() {
  local name first
  name=$(lock_name)
  acquire_fenced "$name" --process "$HOST:1"
  first=$FENCE
  assert_eq "$first" "1" "first fence of a new name"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" fence)" "$first" "fence in status"
  read_doc "$name"
  assert_eq "$(doc_field fence)" "$first" "stored fence"
  assert_eq "$(doc_field token)" "$TOKEN" "stored token"
  ml release "$name" --token "$TOKEN"
  local i
  for i in 1 2 3; do
    acquire_fenced "$name" --process "$HOST:1"
    assert_eq "$FENCE" "$((first + i))" "fence of acquisition $((i + 1))"
    ml release "$name" --token "$TOKEN"
  done
  # Without --fence: plain token line, no fence stored.
  expect_exit 0 -- ml acquire "$name" --process "$HOST:1"
  [[ $(cat "$OUT") =~ ^[0-9a-f]{32}$ ]] || fail_with "acquire without --fence" stdout "$OUT"
  read_doc "$name"
  assert_eq "$(doc_field fence)" "" "stored fence without --fence"
  ml release "$name" --process "$HOST:1"
  # The next fence is still larger than every one before.
  acquire_fenced "$name" --process "$HOST:1"
  ((FENCE > first + 3)) || fail "fence went from $((first + 3)) to $FENCE"
}

grows_across_expiry_takeover() {
  local name before
  name=$(lock_name)
  acquire_fenced "$name" --ttl 1s --process "$HOST:1"
  before=$FENCE
  acquire_fenced "$name" --process "$HOST:2" --wait 15s --grace 100ms
  assert_contains "$T/acquire.err" "had expired"
  assert_eq "$FENCE" "$((before + 1))" "fence after an expiry takeover"
  assert_held_by "$name" "$HOST:2"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" fence)" "$FENCE" "fence in status"
}

# The counter is never deleted: break does not reset it.
grows_across_break() {
  local name before
  name=$(lock_name)
  acquire_fenced "$name" --process "$HOST:1"
  ml break "$name" --force 2>/dev/null
  acquire_fenced "$name" --process "$HOST:1"
  before=$FENCE
  ml break "$name" --force 2>/dev/null
  acquire_fenced "$name" --process "$HOST:2"
  assert_eq "$FENCE" "$((before + 1))" "fence after break --force"
}

independent_per_name() {
  local a b
  a=$(lock_name a)
  b=$(lock_name b)
  acquire_fenced "$a" --process "$HOST:1"
  ml release "$a" --token "$TOKEN"
  acquire_fenced "$a" --process "$HOST:1"
  ml release "$a" --token "$TOKEN"
  acquire_fenced "$a" --process "$HOST:1"
  assert_eq "$FENCE" "3" "third fence of '$a'"
  acquire_fenced "$b" --process "$HOST:1"
  assert_eq "$FENCE" "1" "first fence of '$b' after three of '$a'"
  # Names that only share a prefix are separate too.
  acquire_fenced "$a-x" --process "$HOST:1"
  assert_eq "$FENCE" "1" "first fence of '$a-x'"
}

run_exports_fence() {
  local name
  name=$(lock_name)
  acquire_fenced "$name" --process "$HOST:1"
  ml release "$name" --token "$TOKEN"
  start_bg run ml run "$name" --fence -- sh -c 'printf "%s\n" "$MONGOLOCK_FENCE" >"$1/fence.tmp"; mv "$1/fence.tmp" "$1/fence"; while [ ! -e "$1/go" ]; do sleep 0.05; done' _ "$T"
  local pid=$BG_PID
  wait_file 10 "$T/fence"
  assert_eq "$(cat "$T/fence")" "2" "MONGOLOCK_FENCE"
  expect_exit 0 -- ml status "$name"
  assert_eq "$(status_field "$OUT" fence)" "$(cat "$T/fence")" "fence in status during the run"
  expect_exit 0 -- ml status "$name" --json
  assert_contains "$OUT" "\"fence\": $(cat "$T/fence")"
  touch "$T/go"
  expect_bg_exit 0 "$pid" run
  # Without --fence, run exports no MONGOLOCK_FENCE, not even one inherited from an outer run.
  expect_exit 0 -- ml run "$name" -- sh -c 'echo "${MONGOLOCK_FENCE-unset}"'
  assert_eq "$(cat "$OUT")" "unset" "MONGOLOCK_FENCE without --fence"
  expect_exit 0 -- env MONGOLOCK_FENCE=99 "$MONGOLOCK_BIN" run "$name" -- sh -c 'echo "${MONGOLOCK_FENCE-unset}"'
  assert_eq "$(cat "$OUT")" "unset" "inherited MONGOLOCK_FENCE without --fence"
  # The next fenced run gets the next fence.
  expect_exit 0 -- ml run "$name" --fence -- sh -c 'echo "$MONGOLOCK_FENCE"'
  assert_eq "$(cat "$OUT")" "3" "MONGOLOCK_FENCE of the next fenced run"
}

# run a b --fence: one fence per name, in the order of MONGOLOCK_NAME.
run_multi_name_fences() {
  local a b
  a=$(lock_name a)
  b=$(lock_name b)
  acquire_fenced "$b" --process "$HOST:1"
  ml release "$b" --token "$TOKEN"
  expect_exit 0 -- ml run "$b" "$a" --fence -- sh -c 'printf "%s\n" "$MONGOLOCK_NAME" "$MONGOLOCK_FENCE"'
  assert_eq "$(cat "$OUT")" "$(printf '%s\n' "$a" "$b" 1 2)" "names and fences"
}

# Workers each take the lock with --wait, record their fence, and release.
concurrent_waiters_get_distinct_fences() {
  local name i pids=()
  name=$(lock_name)
  for i in 1 2 3 4 5 6; do
    (
      out=$("$MONGOLOCK_BIN" acquire "$name" --fence --wait 60s --process "$HOST:$((9000 + i))" 2>"$T/err.$i")
      echo "$out" >"$T/fence.$i"
      sleep 0.1
      "$MONGOLOCK_BIN" release "$name" --token "${out%% *}" 2>>"$T/err.$i"
    ) &
    pids+=($!)
    track $!
  done
  local pid rc
  for pid in "${pids[@]}"; do
    wait_until 90 eval "! pid_alive $pid"
    rc=0
    wait "$pid" || rc=$?
    ((rc == 0)) || fail_with "a worker failed ($rc)" stderr "$(ls "$T"/err.* | head -1)"
  done
  cat "$T"/fence.* | awk '{print $2}' | sort -n >"$T/fences"
  assert_eq "$(wc -l <"$T/fences")" "6" "number of fences"
  [[ -z $(uniq -d "$T/fences") ]] || fail_with "two acquisitions got the same fence" fences "$T/fences"
  assert_eq "$(tr '\n' ' ' <"$T/fences")" "1 2 3 4 5 6 " "fences of six acquisitions"
  assert_free "$name"
}

# Semaphore slots share the name's counter: fences are allocated concurrently and still never repeat.
concurrent_slots_get_distinct_fences() {
  local name i pids=()
  name=$(lock_name)
  for i in 1 2 3 4 5 6; do
    start_bg "w$i" ml acquire "$name" --slots 6 --fence --wait 30s --process "$HOST:$((9100 + i))"
    pids+=("$BG_PID")
  done
  for i in 1 2 3 4 5 6; do
    expect_bg_exit 0 "${pids[i - 1]}" "w$i" 60
  done
  cat "$T"/w*.out | awk '{print $2}' | sort -n >"$T/fences"
  assert_eq "$(wc -l <"$T/fences")" "6" "number of fences"
  [[ -z $(uniq -d "$T/fences") ]] || fail_with "two slots got the same fence" fences "$T/fences"
  expect_exit 0 -- ml status "$name" --json
  python3 -c 'import json, sys; d = json.load(sys.stdin); print("\n".join(str(l["fence"]) for l in d["locks"]))' <"$OUT" |
    sort -n >"$T/stored"
  assert_eq "$(cat "$T/stored")" "$(cat "$T/fences")" "stored fences of the slots"
}

# The README's recipe (examples/fenced-write): holder A loses its lock (broken under it) but, with
# --on-lost ignore, its command runs on, unaware; B takes the lock with a newer fencing token and writes;
# A's next write is refused and the file keeps B's data.
fenced_write_refuses_stale_holder() {
  local name
  name=$(lock_name)
  start_bg a ml run "$name" --fence --ttl 3s --on-lost ignore -- sh -c '
    echo a1 | "$1/examples/fenced-write" "$2/data" && touch "$2/a1"
    while [ ! -e "$2/go" ]; do sleep 0.05; done
    echo a2 | "$1/examples/fenced-write" "$2/data"' _ "$REPO_ROOT" "$T"
  wait_file 10 "$T/a1"
  assert_eq "$(cat "$T/data")" a1 "the data after A's first write"
  expect_exit 0 -- ml break "$name" --force
  expect_exit 0 -- ml run "$name" --fence -- sh -c 'echo b | "$1/examples/fenced-write" "$2/data"' _ "$REPO_ROOT" "$T"
  touch "$T/go"
  expect_bg_exit 75 "$BG_PID" a 20
  assert_contains "$T/a.err" "fenced-write: refused: fencing token"
  assert_eq "$(cat "$T/data")" b "the data after the stale holder's write"
}

run_case "acquire --fence prints TOKEN FENCE; +1 per acquisition across release" grows_across_release
run_case "the fence grows by 1 across an expiry takeover" grows_across_expiry_takeover
run_case "the fence grows across break --force" grows_across_break
run_case "names have independent fence counters" independent_per_name
run_case "run --fence exports MONGOLOCK_FENCE as stored" run_exports_fence
run_case "run a b --fence: one fence per name" run_multi_name_fences
run_case "concurrent waiters never get the same fence" concurrent_waiters_get_distinct_fences
run_case "concurrent slot holders never get the same fence" concurrent_slots_get_distinct_fences
run_case "examples/fenced-write: a stale holder's write is refused, the newer holder's kept" fenced_write_refuses_stale_holder
finish
