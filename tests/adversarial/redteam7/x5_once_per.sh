#!/usr/bin/env bash
# x5 (target 5): run --once-per across hosts after the never-connected client fix (mongo_store.cpp reconnect)
# and "an unrecorded success exits 69". a (host-a, --once-per 1h, behind failproxy) holds the lock; b (host-b,
# straight to the server, --once-per 1h --wait 60s) waits. Jobs started (holders.py) and ok records counted.
#   bash x5_once_per.sh CASE [N]
#   CASE: locked   the history insert of a's success refused once as FerretDB SQLite refuses a write under
#                  contention ("database is locked (517)", nothing written; retried for wake-up events, 7804751)
#         primary  refused once with 10107 NotWritablePrimary (an election; label RetryableWriteError: the
#                  driver retries it once)
#         primary2 refused twice with 10107 (the retry refused too)
#         lostrec  the insert applied and its reply lost (close-after): unknown outcome, recorded in fact
#   (the cases of red team 6's F3 are its x3_once_per.sh: `ADV_T=/tmp/adv-rt7 CASE=qfail bash ../redteam6/x3_once_per.sh`)
source "$(dirname "$0")/lib.sh"
case_=${1:-locked}; n=${2:-1}; TTL=${TTL:-15s}
LOCKED='[msg_insert.go:168 handler.(*Handler).MsgInsert] [collection.go:135 sqlite.(*collection).InsertAll.func1] database is locked (517)'
host_run() { # LABEL HOST URI SECONDS [OPTIONS]
  local label=$1 host=$2 uri=$3 s=$4; shift 4
  setsid unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$ML" -v --uri "$uri" run "$NAME" "$@" -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$s" >"$W/$label.out" 2>"$W/$label.err" &
  echo $! >"$W/$label.pid"
}
starts() { grep -c '^start' "$HOLDERS" || true; }
oks() { doc runs "$NAME" | python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r.get("outcome")=="ok"))'; }
for i in $(seq "$n"); do
  new_case "x5$case_"
  fp_start
  host_run a host-a "$FP_URI" 2 --once-per 1h --ttl "$TTL"
  wait_acq
  case $case_ in
  locked) proxy fail insert/_runs times 1 error 1 msg "$LOCKED" ;;
  primary) proxy fail insert/_runs times 1 error 10107 ;;
  primary2) proxy fail insert/_runs times 2 error 10107 ;;
  lostrec) proxy fail insert/_runs times 1 close-after ;;
  esac
  host_run b host-b "$SERVER_URI" 2 --once-per 1h --wait 60s
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x5 $case_: a=$ra b=$rb jobs started=$(starts) ok records=$(oks) $(overlap) dir=$W"
  grep -E "warning|not run" "$W/a.err" "$W/b.err" | cut -c1-300 | sed 's/^/   | /'
  grep -E "_runs" "$W/fp.log" | grep -v rule | head -2 | sed 's/^/   fp| /'
  fp_stop
done
