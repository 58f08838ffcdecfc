#!/usr/bin/env bash
# X3 (documented LIMIT, measured): a root job moves a setsid part of itself out of its cgroup (writes its pid
# into another group's cgroup.procs); mongolock + guardian killed -9; the next run on this host finds the
# job's group empty and its process group gone: taken over at once while the escaped part runs.
# Usage: x3_cgroup_escape.sh [N]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; k=0
mkdir -p "$CG/rt26escape"
for t in $(seq $n); do
  N=x3-$t-$RANDOM; F=$ADV_T/x3-$t.holders; rm -f $F
  start_holder $N "setsid sh -c 'echo \$\$ >$CG/rt26escape/cgroup.procs; exec python3 $HOLDERS_PY job $F --seconds 8' & exec sleep 300"
  sleep 1
  kill_holder; sleep 0.3
  $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2 >$ADV_T/x3.out 2>$ADV_T/x3.err; rc=$?
  ov=$(overlap $F)
  echo "trial $t: contender rc=$rc; $ov; $(grep -h 'taken over\|not taking' $ADV_T/x3.err | head -1)"
  [[ $rc == 0 && $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F; sleep 0.3
done
echo "X3 RESULT: overlap in $k of $n (LIMITS: 'A job that moves itself out of its cgroup ... escapes the cgroup's kill and proof alike')"
