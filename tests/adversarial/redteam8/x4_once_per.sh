#!/usr/bin/env bash
# x4 (target 4): run --once-per's success record resent on 517 and election codes (store/runs.cpp
# insert_runs(), history_insert_retryable(), only_duplicate_ids()). As redteam7's x5: a (host-a, --once-per
# 1h, 2 s job, --ttl TTL=15s, behind failproxy --rs rs0) holds the lock; b (host-b, straight to the server,
# --once-per 1h --wait 60s) waits. Jobs started (holders.py) and ok records counted: 1 job and 1 ok record
# is right; 2 jobs is the job run twice in its period; 2 ok records a duplicate success record.
#   bash x4_once_per.sh CASE [N]
#   CASE: locked1     the insert refused once with "database is locked (517)" (nothing written): resent
#         lockedmany  refused with it every time (times 1000): a exits 69 (documented), b runs
#         locked_close  refused once, the resend applied and its connection reset (close-after)
#         locked_lose refused once, the resend applied and its reply dropped (lose-reply)
#         locked_delay  refused once, the resend forwarded DELAY=12000 ms late (past a's renew deadline)
#         primary3    10107 NotWritablePrimary three times (an election longer than the driver's one retry)
#         wce         applied, writeConcernError 64 (domain write concern: not resent)
#         wce91       applied, writeConcernError 91 ShutdownInProgress (a retryable code, as a write concern error)
#         wlocked     the insert answered {ok: 1, writeErrors: [{code: 1, errmsg: "... database is locked (517)"}]}?
#                     (failproxy cannot: not run)
source "$(dirname "$0")/lib.sh"
case_=${1:-locked1}; n=${2:-1}; TTL=${TTL:-15s}
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
  new_case "x4$case_"
  fp_start
  host_run a host-a "$FP_URI" 2 --once-per 1h --ttl "$TTL"
  wait_acq
  case $case_ in
  locked1) proxy fail insert/_runs times 1 error 1 msg "$LOCKED" ;;
  lockedmany) proxy fail insert/_runs times 1000 error 1 msg "$LOCKED" ;;
  locked_close) proxy fail insert/_runs times 1 error 1 msg "$LOCKED"; proxy fail insert/_runs times 1 close-after ;;
  locked_lose) proxy fail insert/_runs times 1 error 1 msg "$LOCKED"; proxy fail insert/_runs times 1 lose-reply ;;
  locked_delay) proxy fail insert/_runs times 1 error 1 msg "$LOCKED"; proxy fail insert/_runs times 1 delay "${DELAY:-12000}" ;;
  primary3) proxy fail insert/_runs times 3 error 10107 ;;
  wce) proxy fail insert/_runs times 1 wce 64 ;;
  wce91) proxy fail insert/_runs times 1 wce 91 ;;
  esac
  host_run b host-b "$SERVER_URI" 2 --once-per 1h --wait 60s
  rc_of a; ra=$RC; rc_of b; rb=$RC
  sleep "${SETTLE:-0}"
  echo "x4 $case_: a=$ra b=$rb jobs started=$(starts) ok records=$(oks) $(check) dir=$W"
  grep -E "warning|not run|sending it again" "$W/a.err" "$W/b.err" | cut -c1-260 | sed 's/^/   | /'
  grep -E "_runs" "$W/fp.log" | grep -v rule | head -3 | sed 's/^/   fp| /'
  fp_stop
done
