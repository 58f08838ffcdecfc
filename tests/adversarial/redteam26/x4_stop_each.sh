#!/usr/bin/env bash
# X4: SIGSTOP then SIGCONT of each process of a run in turn, for longer than the TTL (3s, stopped 6s), no
# terminal; a contender on host-b (own UTS namespace) waits for the lock (--wait 30s) and runs a 2s job.
# Targets: mongolock, guardian, job (the command), child (a setsid worker of the job), pgid (kill -STOP -PGID,
# the documented way to pause a run), ml+g (mongolock and guardian, pkill -STOP mongolock: a documented LIMIT).
# Prints holder exit, contender exit, overlap (holders.py check), messages.
# Usage: x4_stop_each.sh [N] [on|off] [targets...]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-1}; mode=${2:-on}; shift 2 2>/dev/null
targets=${*:-mongolock guardian job child pgid ml+g}
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
for target in $targets; do
 k=0
 for t in $(seq $n); do
  N=x4-$RANDOM; F=$ADV_T/x4-$target-$t.holders; rm -f $F $ADV_T/child
  TTL=3s start_holder $N "setsid sh -c 'echo \$\$ >$ADV_T/child; exec python3 $HOLDERS_PY job $F --seconds 9' & python3 $HOLDERS_PY job $F --seconds 9; wait"
  for i in $(seq 50); do [[ -s $ADV_T/child ]] && break; sleep 0.1; done
  CHILD=$(cat $ADV_T/child)
  sleep 0.5
  unshare -u sh -c "hostname host-b; exec $ML run $N --wait 30s -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/c.out 2>$ADV_T/c.err &
  C=$!
  sleep 0.5
  case $target in
    mongolock) p="$RUN_PID";; guardian) p="$GUARDIAN_PID";; job) p="$JOB_PID";; child) p="$CHILD";;
    pgid) p="-- -$GUARDIAN_PID";; ml+g) p="$RUN_PID $GUARDIAN_PID";;
  esac
  kill -STOP $p; sleep 6; kill -CONT $p
  wait $RUN_PID; rh=$?
  wait $C; rc=$?
  ov=$(overlap $F)
  echo "[$mode] $target trial $t: holder rc=$rh contender rc=$rc; $ov"
  grep -h 'warning\|lost\|error' $ADV_T/h.err | sed 's/^/    holder: /' | head -4
  grep -h 'warning\|error' $ADV_T/c.err | sed 's/^/    contender: /' | head -2
  [[ $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F
 done
 echo "X4 RESULT [$mode] $target: overlap in $k of $n"
done
