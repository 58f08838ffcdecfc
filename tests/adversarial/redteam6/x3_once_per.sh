#!/usr/bin/env bash
# x3 (target 3): run --once-per across hosts.
#   CASE=race   three runs start together, --once-per 1h --wait 60s: a (host-a) behind faultproxy with D ms per
#               message each way (a slow link), b and c (host-b, host-c) straight to the server. Exactly one
#               job may run (holders.py "start" lines).
#   CASE=hold   a behind faultproxy holds the lock (TTL 6s); when its job ends the proxy holds everything
#               (a partition) for HOLD ms, then passes: a's success record is cut at the deadline; b (host-b,
#               --wait) takes the lock after the lease and runs (documented); then a's held insert lands.
#               How many `ok` records does the period end with, and what did a say?
#   CASE=qfail  loopback, no delay: a (--ttl 6s, 3 s job, behind failproxy) has one queue read after a renewal
#               fail (failproxy close-before: the heartbeat's client is marked failed) before its job ends;
#               b (host-b, --wait) waits. The success record of a must still be written (NOFAULT=1: control).
#               TTL=10s A_JOB=6.3: the job ends 0.4 s before the second renewal (4 s left to the deadline).
#   CASE=maxage --once-per 60s with --history-max-age 5s (and MONGOLOCK_HISTORY_PURGE_EVERY=1): the success
#               is purged before the period ends; does a later run within the period run again?
#   CASE=slots  --slots 2 refused with --once-per from the command line, MONGOLOCK_SLOTS and a config file?
#   CASE=race D=1000 bash x3_once_per.sh [N]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; CASE=${CASE:-race}; D=${D:-1000}; HOLD=${HOLD:-9000}; A_FIRST=${A_FIRST:-0}; NOFAULT=${NOFAULT:-0}
host_run() { # LABEL HOST URI SECONDS [OPTIONS]: mongolock run from HOST (own UTS namespace)
  local label=$1 host=$2 uri=$3 s=$4; shift 4
  setsid unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$ML" -v --uri "$uri" run "$NAME" "$@" -- \
    python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$s" >"$W/$label.out" 2>"$W/$label.err" &
  echo $! >"$W/$label.pid"
}
starts() { grep -c '^start' "$HOLDERS" || true; }
oks() { doc runs "$NAME" | python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin) if r.get("outcome")=="ok"))'; }
for i in $(seq "$n"); do
  new_case "x3$CASE"
  case $CASE in
  race)
    tp_start; tp delay "$D"
    host_run a host-a "$TP_URI" 3 --once-per 1h --wait 60s --ttl "${TTL:-15s}"
    ((A_FIRST)) && wait_acq  # A_FIRST=1: a (the slow link) holds the lock and records the success
    host_run b host-b "$SERVER_URI" 3 --once-per 1h --wait 60s --ttl 15s
    host_run c host-c "$SERVER_URI" 3 --once-per 1h --wait 60s --ttl 15s
    rc_of a; ra=$RC; rc_of b; rb=$RC; rc_of c; rc=$RC; tp_stop
    echo "x3 race D=$D a_first=$A_FIRST ttl(a)=${TTL:-15s}: a=$ra b=$rb c=$rc jobs started=$(starts) ok records=$(oks) dir=$W" ;;
  hold)
    tp_start
    host_run a host-a "$TP_URI" 3 --once-per 1h --ttl 6s
    wait_acq
    host_run b host-b "$SERVER_URI" 1 --once-per 1h --wait 60s
    # the job ends at 3 s: hold everything from just before, so the record, the release and their reconnects hang
    sleep 2.9; tp hold; sleep "$(bc <<<"scale=3; $HOLD/1000")"; tp pass
    rc_of a; ra=$RC; rc_of b; rb=$RC; sleep 1; tp_stop
    echo "x3 hold ${HOLD}ms: a=$ra b=$rb jobs started=$(starts) ok records=$(oks) $(overlap) dir=$W"
    grep -E "warning|error|not run|succeeded" "$W/a.err" "$W/b.err" | cut -c1-300 | sed 's/^/   | /' ;;
  qfail)
    fp_start
    host_run a host-a "$FP_URI" "${A_JOB:-3}" --once-per 1h --ttl "${TTL:-6s}"
    wait_acq
    ((NOFAULT)) || proxy fail find/locks_queue times 1 close-before
    host_run b host-b "$SERVER_URI" 1 --once-per 1h --wait 60s
    rc_of a; ra=$RC; rc_of b; rb=$RC; fp_stop
    echo "x3 qfail nofault=$NOFAULT ttl=${TTL:-6s} job=${A_JOB:-3}s: a=$ra b=$rb jobs started=$(starts) ok records=$(oks) $(overlap) dir=$W"
    grep -E "warning|not run" "$W/a.err" "$W/b.err" | cut -c1-330 | sed 's/^/   | /' ;;
  maxage)
    export MONGOLOCK_HISTORY_PURGE_EVERY=1
    for k in 1 2 3; do
      "$ML" --uri "$SERVER_URI" run "$NAME" --once-per 60s --history-max-age 5s -- python3 "$HOLDERS_PY" job \
        "$HOLDERS" --seconds 0.2 >"$W/r$k.out" 2>"$W/r$k.err"; echo "   run $k (t=$(( (k-1)*7 ))s): rc=$? $(cut -c1-120 "$W/r$k.err")"
      sleep 6.5
    done
    echo "x3 maxage --once-per 60s --history-max-age 5s: jobs started=$(starts) in ~14 s dir=$W" ;;
  slots)
    "$ML" --uri "$SERVER_URI" run "$NAME" --once-per 1h --slots 2 -- true; echo "   --slots 2: rc=$?"
    MONGOLOCK_SLOTS=2 "$ML" --uri "$SERVER_URI" run "$NAME" --once-per 1h -- true; echo "   MONGOLOCK_SLOTS=2: rc=$?"
    MONGOLOCK_ONCE_PER=1h "$ML" --uri "$SERVER_URI" run "$NAME" --slots 2 -- true; echo "   MONGOLOCK_ONCE_PER: rc=$?"
    printf '[run]\nslots = 2\nonce-per = 1h\n' >"$W/config"
    MONGOLOCK_CONFIG=$W/config "$ML" --uri "$SERVER_URI" run "$NAME" -- true; echo "   config [run] slots+once-per: rc=$?" ;;
  esac
done
