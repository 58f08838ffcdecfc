#!/usr/bin/env bash
# G1: run --replace attacked (issue #17), --ttl 6s --renew-interval 2s --kill-grace 1s, jobs are
# holders.py jobs (ticks every 10 ms), overlap by holders.py check. Variants:
#  many     a replacing holder, then 6 replacing runs from 6 hosts (UTS namespaces) 0.3 s apart:
#           no overlap; the newest (host-6) runs its job to the end, the others exit 75
#  kill9    the holder's job ignores SIGTERM; mongolock is kill -9'd while it stops it (the guardian
#           lives): the replacing run from host-b must not start before the old job is gone
#  stopall  mongolock and its guardian SIGSTOPped, then a replacing run from host-b (the known limit
#           of a frozen holder, see issue #19 a2b: reported, not a --replace hole)
#  qkill    the replacing run is kill -9'd while it waits for the holder to stop: a waiter from
#           host-c (--wait 30s) gets the lock within a TTL + grace
#  nopush   a replacing run with --no-push: starts within TTL/3 + kill grace + 1 s
#  forged   a holder's lock document with replace_seq of foreign types and values, then a replacing run:
#           it replaces the holder; with EDGES=1 also tickets at both ends of the int64 range (a
#           ticket at INT64_MIN is a replacing run's: it stops the holder; then no seq is left below
#           it, and the replacing run exits 69 with a one-line message naming the ticket)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
BASE="--ttl 6s --renew-interval 2s"
TIMING="$BASE --kill-grace 1s"
variant=$1
N=g1$variant-$RANDOM
F=$ADV_T/g1$variant.holders
rm -f "$F"
host() { # HOST CMD...: run CMD as host HOST
  local h=$1
  shift
  unshare -u bash -c "hostname $h; exec \"\$@\"" _ "$@"
}
job() { echo python3 "$HOLDERS_PY" job "$F" "$@"; }
case $variant in
many)
  $ML run "$N" $TIMING --replace -- $(job --seconds 60) >"$ADV_T/g1-h0.err" 2>&1 &
  pids=($!)
  sleep 1.5
  for i in 1 2 3 4 5 6; do
    host "host-$i" "$ML" run "$N" $TIMING --replace -- $(job --seconds 4) >"$ADV_T/g1-h$i.err" 2>&1 &
    pids+=($!)
    sleep 0.3
  done
  for i in 0 1 2 3 4 5 6; do
    wait "${pids[$i]}"
    echo "run $i exit $?: $(tail -1 "$ADV_T/g1-h$i.err")"
  done
  ;;
kill9)
  setsid $ML run "$N" --ttl 9s --renew-interval 3s --replace --kill-grace 2s -- $(job --seconds 60 --ignore-term) >"$ADV_T/g1-h0.err" 2>&1 &
  h=$!
  sleep 1.5
  host host-b "$ML" run "$N" $TIMING --replace -- $(job --seconds 2) >"$ADV_T/g1-hb.err" 2>&1 &
  b=$!
  for _ in $(seq 100); do grep -q '^term' "$F" && break; sleep 0.05; done
  kill -KILL "$h"
  echo "killed mongolock during its stop at $(now)"
  wait "$b"
  echo "host-b exit $?: $(tail -1 "$ADV_T/g1-hb.err")"
  ;;
stopall)
  setsid $ML run "$N" $TIMING --replace -- $(job --seconds 30) >"$ADV_T/g1-h0.err" 2>&1 &
  h=$!
  sleep 1.5
  g=$(pgrep -P "$h" | head -1)
  kill -STOP "$h" "$g"
  host host-b "$ML" run "$N" $TIMING --replace -- $(job --seconds 2) >"$ADV_T/g1-hb.err" 2>&1
  echo "host-b exit $?: $(tail -1 "$ADV_T/g1-hb.err")"
  kill -CONT "$h" "$g"
  wait "$h"
  echo "holder exit $?: $(tail -1 "$ADV_T/g1-h0.err")"
  ;;
qkill)
  $ML run "$N" --ttl 9s --renew-interval 3s --replace --kill-grace 2s -- $(job --seconds 60 --ignore-term) >"$ADV_T/g1-h0.err" 2>&1 &
  h=$!
  sleep 1.5
  host host-b "$ML" run "$N" $TIMING --replace -- $(job --seconds 2) >"$ADV_T/g1-hb.err" 2>&1 &
  b=$!
  for _ in $(seq 100); do grep -q '^term' "$F" && break; sleep 0.05; done
  kill -KILL "$b"
  t0=$(now)
  host host-c "$ML" run "$N" $TIMING --wait 30s -- $(job --seconds 1) >"$ADV_T/g1-hc.err" 2>&1
  echo "host-c exit $? after $(echo "$(now) - $t0" | bc) s: $(tail -1 "$ADV_T/g1-hc.err")"
  wait "$h"
  echo "holder exit $?: $(tail -1 "$ADV_T/g1-h0.err")"
  ;;
nopush)
  $ML run "$N" $TIMING --replace -- $(job --seconds 60) >"$ADV_T/g1-h0.err" 2>&1 &
  h=$!
  sleep 1.5
  t0=$(now)
  host host-b "$ML" run "$N" $TIMING --replace --no-push -- sh -c 'echo started; exec "$@"' _ $(job --seconds 1) >"$ADV_T/g1-hb.out" 2>"$ADV_T/g1-hb.err" &
  b=$!
  for _ in $(seq 400); do grep -q started "$ADV_T/g1-hb.out" && break; sleep 0.05; done
  echo "host-b started after $(echo "$(now) - $t0" | bc) s (bound: TTL/3 + kill grace + 1 s = 4 s)"
  wait "$b" "$h"
  ;;
forged)
  # A replacing holder whose lock document another client rewrote (replace_seq of a foreign type or
  # value), and planted tickets at the int64 edges; then a replacing run from host-b.
  for v in replace_seq=abc replace_seq:double=1e308 replace_seq:double=nan replace_seq:int=-9223372036854775808 \
    replace_seq:int=9223372036854775807 replace_seq:doc=x; do
    N=g1forged-$RANDOM
    $ML run "$N" $TIMING --replace -- $(job --seconds 8) >"$ADV_T/g1-h0.err" 2>&1 &
    h=$!
    sleep 1.2
    python3 "$MONGO_PY" set "$N" "${v%%=*}" "${v#*=}"
    if [[ ${EDGES:-} ]]; then
      python3 "$MONGO_PY" insert-ticket "$N" -9223372036854775808 evil:1 30
      python3 "$MONGO_PY" insert-ticket "$N" 9223372036854775807 evil:2 30
    fi
    t0=$(now)
    host host-b timeout 40 "$ML" run "$N" $TIMING --replace -- $(job --seconds 1) >"$ADV_T/g1-hb.err" 2>&1
    rb=$?
    wait "$h"
    rh=$?
    echo "$v: host-b exit $rb after $(echo "$(now) - $t0" | bc) s: $(tail -1 "$ADV_T/g1-hb.err" | cut -c1-160)"
    echo "    holder exit $rh: $(tail -1 "$ADV_T/g1-h0.err" | cut -c1-160)"
  done
  ;;
esac
python3 "$HOLDERS_PY" check "$F" --gap-ms 200 | tail -1
