#!/usr/bin/env bash
# x2: a silent failover that never ends (blackout 120 s: the old connection silent, new ones never answered)
# at a renewal. The job must be stopped by the renew deadline and (man LIMITS) mongolock "exits right after
# it". Measures: renew deadline (from the doc), job's last tick, mongolock's exit, its status and last lines.
#   bash x2_long_blackout_exit.sh N [TTL]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; ttl=${2:-6s}
for i in $(seq "$n"); do
  new_case x2; fp_start
  holder a "$FP_URI" 60 --ttl "$ttl"
  wait_acq; wait_ren a 1
  exp=$(doc doc "$NAME" | sed -n 's/^expires_at=//p')
  t0=$(now_ms)
  proxy blackout 120000 findAndModify:update
  rc_of a; ra=$RC; t1=$(now_ms)
  last=$(python3 "$HOLDERS_PY" last "$HOLDERS" "$(hostname)"); last=$((last / 1000000))
  echo "x2 ttl=$ttl: a=$ra blackout->exit $((t1 - t0))ms; lease expiry(doc, last renewal)=$exp job_last_tick-expiry=$((last - exp))ms mongolock_exit-job_last=$((t1 - last))ms dir=$W"
  tail -4 "$W/a.err" | sed 's/^/   | /'
  fp_stop
done
