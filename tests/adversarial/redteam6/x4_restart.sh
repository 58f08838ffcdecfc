#!/usr/bin/env bash
# x4 (target 4): libmongoc's idle-socket check is off (socketCheckIntervalMS=INT32_MAX unless the URI sets it,
# 08da04d). A connection that died between two renewals must still be replaced in time for the next one.
#   MODE=restart: FerretDB killed (SIGKILL) and started again on the same port and data AT ms after a renewal
#                 (the holder straight to the server, a contender on host-b waiting);
#   MODE=reset:   faultproxy resets (RST) every open connection AT ms after a renewal (holder behind it);
#   MODE=blackout: failproxy: open connections go silent for good, new ones answered after BO ms.
#   TTL=6s MODE=restart AT=300 bash x4_restart.sh [N]
# URI_OPTS=socketCheckIntervalMS=5000 puts libmongoc's default back (the control).
source "$(dirname "$0")/lib.sh"
n=${1:-1}; TTL=${TTL:-6s}; MODE=${MODE:-restart}; AT=${AT:-300}; BO=${BO:-1500}; JOB=${JOB:-14}
opts=${URI_OPTS:+?$URI_OPTS}
for i in $(seq "$n"); do
  new_case "x4$MODE"
  case $MODE in
  restart) uri="$SERVER_URI$opts" ;;
  reset) tp_start; uri="$TP_URI$opts" ;;
  blackout) fp_start; uri="$FP_URI${URI_OPTS:+&$URI_OPTS}" ;;
  esac
  holder a "$uri" "$JOB" --ttl "$TTL"
  wait_acq; contender b 2
  wait_ren a 1; sleep "$(bc <<<"scale=3; $AT/1000")"
  t0=$(now_ms)
  case $MODE in
  restart)
    srv_kill; while srv_running; do sleep 0.01; done; t1=$(now_ms)
    srv_start; echo "   server down ${t1}..$(now_ms) ($(($(now_ms) - t0)) ms from the kill to answering)" ;;
  reset) tp reset ;;
  blackout) proxy blackout "$BO" ;;
  esac
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x4 $MODE ttl=$TTL at=${AT}ms: a=$ra ($(renewals a) renewals) b=$rb $(overlap) dir=$W"
  grep -E "warning|error|lost|failed|counts from" "$W/a.err" | head -4 | cut -c1-260 | sed 's/^/   | /'
  [[ $MODE == reset ]] && tp_stop
  [[ $MODE == blackout ]] && fp_stop
done
