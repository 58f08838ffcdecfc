#!/usr/bin/env bash
# X5: kill -9 of mongolock and its guardian together (one kill(1) call, as pkill -9 mongolock) at a random moment
# 0-1.5s after the run starts (during connect/acquire/guardian start/job start), job = a 4s holders job with a
# setsid 4s worker; then at once a contender on this host (--wait 40s) runs a 1s job. Measures overlap
# (the same-host run must never take over while the worker runs) and whether anything is left running
# unsupervised past the old lease. With HOSTB=1 the contender runs on host-b (own UTS namespace): the job's
# survivors then overlap it once the lease (4s) + grace has passed (LIMITS, first bullet): the worker runs
# ${WORK:-4}s. Usage: [HOSTB=1] [WORK=S] x5_random_kill9.sh [N] [on|off]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-10}; mode=${2:-on}; k=0; taken=0
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
for t in $(seq $n); do
  N=x5-$t-$RANDOM; F=$ADV_T/x5-$t.holders; rm -f $F
  $ML run -v $N --ttl 4s -- sh -c "setsid python3 $HOLDERS_PY job $F --seconds ${WORK:-4} & python3 $HOLDERS_PY job $F --seconds 4; wait" >$ADV_T/h.out 2>$ADV_T/h.err &
  R=$!
  d=$(python3 -c "import random; print(round(random.uniform(0, 1.5), 3))")
  sleep $d
  G=$(ps -o pid= --ppid $R | tr -d ' ' | head -1)
  kill -9 $R $G 2>/dev/null; wait $R 2>/dev/null
  if [[ ${HOSTB:-} == 1 ]]; then
    unshare -u sh -c "hostname host-b; exec $ML run -v $N --wait 40s -- python3 $HOLDERS_PY job $F --seconds 1" >$ADV_T/c.out 2>$ADV_T/c.err; rc=$?
  else
    $ML run -v $N --wait 40s -- python3 $HOLDERS_PY job $F --seconds 1 >$ADV_T/c.out 2>$ADV_T/c.err; rc=$?
  fi
  ov=$(overlap $F)
  tk=$(grep -c 'taken over' $ADV_T/c.err)
  taken=$((taken + tk))
  echo "[$mode] trial $t: kill at ${d}s (guardian ${G:-none}); contender rc=$rc takeover=$tk; $ov"
  [[ $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F
done
echo "X5 RESULT [$mode]: overlap in $k of $n (instant takeovers: $taken)"
