#!/usr/bin/env bash
# Mutual exclusion under contention: 8 processes loop `mongolock run` on one name for ~10 s; each
# command records enter/leave in one file. No two critical sections may overlap.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

WORKERS=8
SECONDS_TO_RUN=10

# worker ID NAME LOG END_MS: runs the critical section until END_MS; refused attempts (75) retry.
# Any other exit status is written to $T/worker-ID.bad.
worker() {
  local id=$1 name=$2 log=$3 end=$4 rc
  while (($(now_ms) < end)); do
    rc=0
    WORKER_ID=$id "$MONGOLOCK_BIN" -q run "$name" --ttl 5s -- \
      sh -c 'echo "enter $WORKER_ID" >>"$1"; sleep 0.05; echo "leave $WORKER_ID" >>"$1"' _ "$log" \
      2>>"$T/worker-$id.err" || rc=$?
    case $rc in
    0) echo x >>"$T/worker-$id.entered" ;;
    75) sleep 0.01 ;;
    *) echo "$rc" >>"$T/worker-$id.bad" ;;
    esac
  done
}

no_overlap() {
  local name log end i
  name=$(lock_name)
  log=$T/critical.log
  : >"$log"
  end=$(($(now_ms) + SECONDS_TO_RUN * 1000))
  local pids=()
  for ((i = 1; i <= WORKERS; i++)); do
    worker "$i" "$name" "$log" "$end" &
    pids+=($!)
    track $!
  done
  for i in "${pids[@]}"; do
    wait "$i"
  done

  # No worker saw anything but 0 and 75.
  local bad
  for ((i = 1; i <= WORKERS; i++)); do
    if [[ -e $T/worker-$i.bad ]]; then
      bad=$(sort -u "$T/worker-$i.bad" | tr '\n' ' ')
      fail_with "worker $i got exit status $bad" stderr "$T/worker-$i.err"
    fi
  done

  # The log strictly alternates "enter X" / "leave X" with the same X.
  local n=0 line inside="" sections=0
  while IFS= read -r line; do
    n=$((n + 1))
    case $line in
    "enter "*)
      [[ -z $inside ]] || fail_with "line $n: '$line' while worker $inside is inside" log "$log"
      inside=${line#enter } ;;
    "leave "*)
      [[ ${line#leave } == "$inside" && -n $inside ]] || fail_with "line $n: '$line' but inside: '$inside'" log "$log"
      inside=""
      sections=$((sections + 1)) ;;
    *) fail_with "line $n: unexpected '$line'" log "$log" ;;
    esac
  done <"$log"
  [[ -z $inside ]] || fail "the log ends inside worker $inside's critical section"

  # Every successful run is one critical section in the log.
  local entered
  entered=$(cat "$T"/worker-*.entered 2>/dev/null | wc -l)
  assert_eq "$sections" "$entered" "critical sections in the log vs runs that exited 0"
  ((sections >= 20)) || fail "only $sections critical sections in ${SECONDS_TO_RUN}s"
  local distinct
  distinct=$(grep '^enter ' "$log" | sort -u | wc -l)
  ((distinct >= 3)) || fail "only $distinct different workers got in"
  echo "# $sections critical sections by $distinct of $WORKERS workers"
  assert_free "$name"
}

# contender ID NAME: tries to acquire NAME as host:ID until it succeeds or 20 s passed; writes its
# token to $T/won-ID on success.
contender() {
  local id=$1 name=$2 end rc
  end=$(($(now_ms) + 20000))
  while (($(now_ms) < end)); do
    rc=0
    "$MONGOLOCK_BIN" -q --grace 100ms acquire "$name" --process "$HOST:$id" >"$T/token-$id" 2>>"$T/contender-$id.err" || rc=$?
    case $rc in
    0) mv "$T/token-$id" "$T/won-$id"; return ;;
    75) sleep 0.01 ;;
    *) echo "$rc" >>"$T/contender-$id.bad"; return ;;
    esac
  done
}

# Many contenders waiting for one expired lock: exactly one takes it over; nobody takes it before it
# has expired.
takeover_race() {
  local name i
  name=$(lock_name)
  expect_exit 0 -- ml acquire "$name" --ttl 2s --process "$HOST:0"
  local pids=()
  for ((i = 1; i <= WORKERS; i++)); do
    contender "$i" "$name" &
    pids+=($!)
    track $!
  done
  # Once one has won, the others keep trying (and must keep failing) until their 20 s are up; stop
  # them after a few more seconds of trying.
  wait_until 20 eval "compgen -G '$T/won-*' >/dev/null"
  sleep 3
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  ! compgen -G "$T/contender-*.bad" >/dev/null || fail "a contender exited neither 0 nor 75: $(cat "$T"/contender-*.bad)"
  local winners
  winners=$(compgen -G "$T/won-*" | wc -l)
  assert_eq "$winners" "1" "contenders that took the lock over"
  local winner
  winner=$(compgen -G "$T/won-*")
  winner=${winner##*/won-}
  assert_held_by "$name" "$HOST:$winner"
  read_doc "$name"
  assert_eq "$(doc_field token)" "$(cat "$T/won-$winner")" "token of the stored lock"
}

run_case "$WORKERS processes looping run on one name: no overlapping critical sections" no_overlap
run_case "$WORKERS contenders for one expiring lock: exactly one takes it over" takeover_race
finish
