#!/usr/bin/env bash
# X6: the guardian alone stopped by pid (kill -STOP, as cpulimit or an operator does; mongolock says so and keeps
# renewing), then mongolock killed -9 (OOM). plain: a run of its own; nested: `run A -- mongolock run B -- job`
# (the inner guardian's process group then has a parent in another group of the same session, the outer
# guardian: the kernel does not SIGCONT it as an orphaned group). The job ignores SIGHUP (nohup). A contender
# on host-b waits for B (--wait 30s) and runs a 2s job. Does anything stop the old job before its lease ends?
# init: a container whose PID 1 stays and keeps mongolock in its session (a cron such as supercronic; here
# `sh -c "mongolock run B -- job & exec sleep 1000"` in unshare -pf --mount-proc): the guardian is reparented
# to PID 1, in the same session, so again no SIGCONT.
# Usage: x6_stopped_guardian_then_kill.sh [N] [plain|nested|init] [on|off]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; shape=${2:-plain}; mode=${3:-on}; k=0
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
for t in $(seq $n); do
  A=x6a-$RANDOM; B=x6b-$RANDOM; F=$ADV_T/x6-$t.holders; rm -f $F $ADV_T/job
  inner="$ML run -v $B --ttl 3s -- sh -c 'echo \$\$ >$ADV_T/job; trap \"\" HUP; exec python3 $HOLDERS_PY job $F --seconds 12'"
  if [[ $shape == init ]]; then
    unshare -pf --mount-proc sh -c "$inner & exec sleep 1000" >$ADV_T/h.out 2>$ADV_T/h.err &
  elif [[ $shape == nested ]]; then
    $ML run $A --ttl 30s -- sh -c "$inner" >$ADV_T/h.out 2>$ADV_T/h.err &
  else
    sh -c "exec $inner" >$ADV_T/h.out 2>$ADV_T/h.err &
  fi
  OUT=$!
  for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
  if [[ $shape == init ]]; then # host pids: unshare -> sh (PID 1) -> mongolock -> guardian -> job
    P1=$(ps -o pid= --ppid $OUT | tr -d " "); INNER=$(ps -o pid=,comm= --ppid $P1 | awk '$2 == "mongolock" {print $1}')
    G=$(ps -o pid= --ppid $INNER | tr -d ' '); JOB=$(ps -o pid= --ppid $G | tr -d ' ')
  else
    JOB=$(cat $ADV_T/job); G=$(ps -o ppid= -p $JOB | tr -d ' '); INNER=$(ps -o ppid= -p $G | tr -d ' ')
  fi
  sleep 0.5
  kill -STOP $G; sleep 0.5
  kill -KILL $INNER
  t0=$(date +%s.%N)
  unshare -u sh -c "hostname host-b; exec $ML run $B --wait 30s -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/c.out 2>$ADV_T/c.err; rc=$?
  ov=$(overlap $F)
  gstate=$(awk '{print $3}' /proc/$G/stat 2>/dev/null || echo gone)
  jalive=$(kill -0 $JOB 2>/dev/null && echo "job still runs" || echo "job gone")
  echo "[$mode $shape] trial $t: contender rc=$rc after $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-5)s; guardian state $gstate; $jalive; $ov"
  [[ $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  kill -CONT $G 2>/dev/null; cleanup_jobs $F; [[ $shape == init ]] && kill -KILL $P1; kill $OUT 2>/dev/null; wait $OUT 2>/dev/null
done
echo "X6 RESULT [$mode $shape]: overlap in $k of $n"
