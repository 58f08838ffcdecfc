#!/usr/bin/env bash
# X15: the guardian alone stopped by pid and never continued; the job ends on its own after 2s. Does mongolock
# notice the job's end and release (man: "keeps renewing until it is continued or the job ends"), or does it
# hold the lock, renewed, with nothing of the job running? Usage: x15_stopped_guardian_job_ends.sh [on|off]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mode=${1:-on}; [[ $mode == off ]] && export MONGOLOCK_CGROUP=off
N=x15-$RANDOM
TTL=3s start_holder $N "exec sleep 2"
kill -STOP $GUARDIAN_PID
for i in $(seq 20); do sleep 1; kill -0 $RUN_PID 2>/dev/null || break; done
if kill -0 $RUN_PID 2>/dev/null; then
  echo "[$mode] after 20s: mongolock still runs; job $(kill -0 $JOB_PID 2>/dev/null && echo runs || echo ended); status: $($ML status $N 2>&1 | head -1)"
  kill -CONT $GUARDIAN_PID; wait $RUN_PID; echo "  after kill -CONT of the guardian: exit $?"
else
  wait $RUN_PID; echo "[$mode] mongolock exited $? after ${i}s; status exit $($ML status $N >/dev/null 2>&1; echo $?)"
fi
grep -h 'warning\|error' $ADV_T/h.err | sed 's/^/    /' | head -3
kill -CONT $GUARDIAN_PID 2>/dev/null
