#!/usr/bin/env bash
# x6 (target 6): the wake-up events collection made capped again when found plain (queue.cpp
# recreate_events_collection()) and FerretDB's trim of old events (trim_events()). Collections of the case's
# own (MONGOLOCK_COLLECTION). a (run) holds HOLD s; waiters b.. (other hosts, run --wait 60s, 0.5 s jobs).
# Prints the handover gaps (a job's end to the next job's start, ms; a lost wake-up shows as a gap near the
# head's 1.5 s check or longer), exit codes, overlap, and the waiters' lines about the events.
#   bash x6_events.sh CASE [N]
#   CASE: race     the events collection is plain (made by a release's insert before any waiter); W (default 5)
#                  waiters start together while a holds: each finds it plain, drops it and creates it capped,
#                  possibly under another's new cursor
#         dropmid  waiters b c d queued and following; then the events collection is dropped and a plain one
#                  made by an insert (as a release's event insert does when the collection is missing), before
#                  a releases
#         trim     W (default 8) waiters, a and every job 0.2 s: fast handovers make events faster than FerretDB
#                  trims them; trim_events() runs at every waiter's new cursor
source "$(dirname "$0")/lib.sh"
case_=${1:-race}; n=${2:-1}; HOLD=${HOLD:-4}
evcmd() { python3 -c 'import json, sys; sys.path.insert(0, sys.argv[1]); import mongo; print(mongo.command(json.loads(sys.argv[2])))' \
  "$REPO/tests/integration" "$1"; }
waiter() { # LABEL HOST SECONDS
  unshare --uts sh -c 'hostname "$0" && exec "$@"' "$2" "$ML" -v --uri "$SERVER_URI" run "$NAME" --wait 60s -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$3" >"$W/$1.err.tmp" 2>"$W/$1.err" &
  echo $! >"$W/$1.pid"
}
gaps() { awk '$1=="end" {e=$4} $1=="start" && e {printf "%d ", ($4 - e) / 1e6}' "$HOLDERS"; }
tickets() { doc tickets "$NAME" 2>/dev/null | grep -c . || true; }
for i in $(seq "$n"); do
  new_case "x6$case_"
  export MONGOLOCK_COLLECTION=rt7ev$RANDOM
  EV=${MONGOLOCK_COLLECTION}_events
  labels=()
  case $case_ in
  race)
    "$ML" --uri "$SERVER_URI" run "$NAME-pre" -- sleep 0.3 # a release's insert: the events collection, plain
    evcmd "{\"insert\": \"$EV\", \"documents\": [{\"name\": \"x\", \"t\": 1}], \"\$db\": \"mongolock_events\"}" >/dev/null
    holder a "$SERVER_URI" "$HOLD"; wait_acq
    for k in $(seq "${W_:-5}"); do waiter "w$k" "host-$k" 0.5; labels+=("w$k"); done ;;
  dropmid)
    holder a "$SERVER_URI" "$HOLD"; wait_acq
    for k in b c d; do waiter "$k" "host-$k" 0.5; labels+=("$k")
      for j in $(seq 100); do (($(tickets) >= ${#labels[@]})) && break; sleep 0.05; done; done
    sleep 1.6 # a's renewal marks the lock (waiters known) only at its next renewal: HOLD's default TTL: 10 s
    evcmd "{\"drop\": \"$EV\", \"\$db\": \"mongolock_events\"}" >"$W/drop.out"
    evcmd "{\"insert\": \"$EV\", \"documents\": [{\"name\": \"x\", \"t\": 1}], \"\$db\": \"mongolock_events\"}" >/dev/null ;;
  trim)
    holder a "$SERVER_URI" 0.2; wait_acq
    for k in $(seq "${W_:-8}"); do waiter "w$k" "host-$k" 0.2; labels+=("w$k"); done ;;
  esac
  rc_of a; rcs="a=$RC"
  for l in "${labels[@]}"; do rc_of "$l"; rcs+=" $l=$RC"; done
  echo "x6 $case_: $rcs jobs=$(grep -c '^start' "$HOLDERS") gaps(ms): $(gaps)$(overlap) events left=$(doc events 2>/dev/null) dir=$W"
  cat "$W"/*.err | grep -oE "was not capped|push wake-ups stopped[^;]*|push wake-ups failed \([^:]*|woken by a release|trimmed [0-9]+ wake-up|following the events anew|non.capped[^)]{0,40}" |
    sed -E 's/trimmed [0-9]+/trimmed N/' | sort | uniq -c | sed 's/^/   | /'
  python3 "$MONGO_PY" drop >/dev/null 2>&1
done
