#!/usr/bin/env bash
# x3 (target 3): the server-time condition's fallback (store::ServerTimeCondition, locks.cpp MongoStore::renew).
# FerretDB v1.24.2 refuses {$expr: {$gt: ["$expires_at", "$$NOW"]}} with 238; the renewal is then sent once
# more without it. failproxy (--rs rs0) in front of the server; a contender on host-b waits (overlap check).
#   bash x3_servertime.sh CASE [N]
#   CASE: lostresend  run --ttl $TTL (default 10s): its first renewal is refused by the server (238, real);
#                     failproxy drops the reply to the resend (lose-reply): the resend was applied, its outcome
#                     unknown to the run. Must count as unknown (pinned), never as renewed; no overlap.
#         closeresend the same with the resend's connection reset after it was applied (close-after)
#         renew_lost  `renew --token T` of an acquired lock (--ttl 5s): the resend's reply dropped: exit 69
#                     (unknown outcome), or 0 only with a lease still running; then host-b tries `acquire`
#                     (NORS=1: the URI without replicaSet; FIRST=1: the first findAndModify's reply is lost
#                     instead, for a control binary that sends no condition and so no resend)
#         renew_slow  the same, no reply lost: the resend delayed DELAY ms (default 6000) past the 3 s TTL
#         refuse2     the first renewal refused by failproxy with 238 and its resend refused with 2 BadValue
#                     "...$expr...": that renewal fails; the next ones renew (run exit 0, no overlap)
source "$(dirname "$0")/lib.sh"
case_=${1:-lostresend}; n=${2:-1}; TTL=${TTL:-10s}
for i in $(seq "$n"); do
  new_case "x3$case_"
  fp_start
  case $case_ in
  lostresend|closeresend|refuse2)
    if [[ $case_ == refuse2 ]]; then
      proxy fail findAndModify:update times 1 error 238 msg "Aggregation expression variables are not implemented yet"
      proxy fail findAndModify:update times 1 error 2 msg "unknown top level operator: \$expr"
    else
      proxy fail findAndModify:update times 1 delay 1 # the first: forwarded, the server refuses it (238)
      proxy fail findAndModify:update times 1 "$([[ $case_ == lostresend ]] && echo lose-reply || echo close-after)"
    fi
    holder a "$FP_URI" 14 --ttl "$TTL"
    wait_acq; contender b 1
    rc_of a; ra=$RC; rc_of b; rb=$RC
    echo "x3 $case_ ttl=$TTL: a=$ra ($(renewals a) renewals) b=$rb $(overlap) dir=$W"
    grep -E "unknown|pinn|counts from|error|lost|server-time|refuses" "$W/a.err" | head -4 | cut -c1-300 | sed 's/^/   | /' ;;
  renew_slow)
    # no reply lost: the resend (FerretDB refused the first for its condition) delayed DELAY ms (default 6000)
    # past the lock's 3 s TTL; its filter's expiry bound is from the command's start
    T=$("$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 3s)
    [[ -n ${FIRST:-} ]] || proxy fail findAndModify:update times 1 delay 1
    proxy fail findAndModify:update times 1 delay "${DELAY:-6000}"
    t0=$(now_ms)
    timeout 60 "$ML" -v --uri "$FP_URI" renew "$NAME" --token "$T" >"$W/r.out" 2>"$W/r.err"; rr=$?
    left=$(( $(doc doc "$NAME" | awk -F= '$1=="expires_at"{print $2}') - $(doc now) ))
    unshare --uts sh -c 'hostname host-b && exec "$@"' sh "$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 30s >"$W/b.out" 2>"$W/b.err"; rb=$?
    echo "x3 renew_slow delay=${DELAY:-6000}: renew rc=$rr after $(( $(now_ms) - t0 )) ms; the lock's expiry $left ms from the server's now; host-b acquire rc=$rb dir=$W"
    grep -E "renewed until|renewing above|error" "$W/r.err" | tail -2 | cut -c1-250 | sed 's/^/   | /' ;;
  renew_lost)
    T=$("$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 5s)
    # FIRST=1: the first findAndModify's reply is lost (a control binary without the condition sends one)
    [[ -n ${FIRST:-} ]] || proxy fail findAndModify:update times 1 delay 1
    proxy fail findAndModify:update times 1 lose-reply
    t0=$(now_ms)
    uri=$FP_URI; [[ -n ${NORS:-} ]] && uri=${FP_URI%%\?*} # NORS=1: no replicaSet, no retryable writes
    timeout 60 "$ML" -v --uri "$uri" renew "$NAME" --token "$T" >"$W/r.out" 2>"$W/r.err"; rr=$?
    left=$(( $(doc doc "$NAME" | awk -F= '$1=="expires_at"{print $2}') - $(doc now) ))
    # another host right after the renew said 0: does it get the lock the renewal's caller believes it holds?
    unshare --uts sh -c 'hostname host-b && exec "$@"' sh "$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 30s >"$W/b.out" 2>"$W/b.err"; rb=$?
    echo "x3 renew_lost${NORS:+ NORS}: renew rc=$rr after $(( $(now_ms) - t0 )) ms; the lock's expiry $left ms from the server's now; host-b acquire rc=$rb dir=$W"
    tail -2 "$W/r.err" | cut -c1-300 | sed 's/^/   | /' ;;
  esac
  grep -E "fired|lose|close|error" "$W/fp.log" | head -4 | sed 's/^/   fp| /'
  fp_stop
done
