#!/usr/bin/env bash
# X14: the guardian alone stopped by pid (mongolock warns and keeps renewing), then the lease is lost while
# mongolock runs: the lock is broken from elsewhere (`mongolock break --force`; a renewal then finds it gone).
# --on-lost term must stop the job; with its guardian stopped, does anything stop it? A host-b waiter takes
# the lock after the break and runs a 3s job. Measures how long the old job runs beside it and the exits.
# Usage: x14_stopped_guardian_lost_lease.sh [N] [on|off]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; mode=${2:-on}; k=0
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
for t in $(seq $n); do
  N=x14-$t-$RANDOM; F=$ADV_T/x14-$t.holders; rm -f $F
  TTL=6s start_holder $N "exec python3 $HOLDERS_PY job $F --seconds 15"
  sleep 0.5
  unshare -u sh -c "hostname host-b; exec $ML run $N --wait 30s -- python3 $HOLDERS_PY job $F --seconds 3" >$ADV_T/c.out 2>$ADV_T/c.err &
  C=$!
  sleep 0.5
  kill -STOP $GUARDIAN_PID; sleep 0.3
  $ML break $N --force >/dev/null 2>&1
  tb=$(date +%s.%N)
  wait $C; rc=$?
  jst=$(kill -0 $JOB_PID 2>/dev/null && echo "old job STILL RUNS" || echo "old job ended")
  kill -CONT $GUARDIAN_PID
  wait $RUN_PID; rh=$?
  ov=$(overlap $F)
  echo "[$mode] trial $t: holder exit $rh, host-b exit $rc ($(echo "$(date +%s.%N) - $tb" | bc | cut -c1-4)s after the break); at host-b's end: $jst; $ov"
  grep -h 'warning\|error' $ADV_T/h.err | sed 's/^/    holder: /' | head -3
  [[ $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F
done
echo "X14 RESULT [$mode]: overlap in $k of $n"
