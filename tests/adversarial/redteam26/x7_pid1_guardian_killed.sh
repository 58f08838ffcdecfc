#!/usr/bin/env bash
# X7: mongolock as PID 1 of a PID namespace (unshare -pf --mount-proc, a container's entrypoint); the job starts
# a setsid worker (leaves the process group and session); the guardian is killed -9 (only it). mongolock, PID 1,
# then kills "what is left of the job" and releases. Without a cgroup (MONGOLOCK_CGROUP=off, or no cgroup2),
# and as PID 1 it does not scan its own children (d92b927): is the setsid worker, now mongolock's child,
# left running while the lock is released? A contender on this host runs a 2s job right after.
# Also: an unrelated process entered with nsenter (an orphan of PID 1) must not be killed.
# Usage: x7_pid1_guardian_killed.sh [N] [on|off]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; mode=${2:-off}; k=0
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
for t in $(seq $n); do
  N=x7-$t-$RANDOM; F=$ADV_T/x7-$t.holders; rm -f $F $ADV_T/job
  unshare -pf --mount-proc $ML run -v $N --ttl 30s -- sh -c "echo \$\$ >$ADV_T/job; setsid python3 $HOLDERS_PY job $F --seconds 6 & sleep 300" >$ADV_T/h.out 2>$ADV_T/h.err &
  U=$!
  for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
  INIT=$(ps -o pid= --ppid $U | tr -d ' ')
  G=$(ps -o pid= --ppid $INIT | tr -d ' ' | head -1)
  nsenter -t $INIT -p -m sh -c 'sleep 100 & echo $! >/dev/null' ; sleep 0.3
  OTHER=$(ps -o pid=,comm= --ppid $INIT | awk '$2 == "sleep" {print $1}' | head -1)
  sleep 0.7
  kill -KILL $G
  wait $U; rh=$?
  $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2 >$ADV_T/c.out 2>$ADV_T/c.err; rc=$?
  ov=$(overlap $F)
  echo "[$mode] trial $t: PID-1 run exit $rh; contender rc=$rc; nsenter orphan ${OTHER:-?} $(kill -0 ${OTHER:-0} 2>/dev/null && echo alive || echo dead); $ov"
  grep -h 'warning' $ADV_T/h.err | sed 's/^/    holder: /' | head -3
  [[ $rc == 0 && $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F; [[ -n $OTHER ]] && kill $OTHER 2>/dev/null
done
echo "X7 RESULT [$mode]: overlap in $k of $n"
