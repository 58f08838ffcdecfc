#!/usr/bin/env bash
# X16: any local user creates a FIFO named like a dead run's holder file in /dev/shm
# (mongolock-run-PID-START.lock, PID of no process). Every later `mongolock run` on the host sweeps /dev/shm at
# start (HolderFile, before it acquires) and opens that file O_RDONLY without O_NONBLOCK: does it block in
# open(2) for good, running no job at all (cron runs pile up)? Usage: x16_fifo_in_shm.sh
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
fifo=/dev/shm/mongolock-run-32000-12345.lock
kill -0 32000 2>/dev/null && { echo "pid 32000 exists; pick another"; exit 2; }
rm -f $fifo
setpriv --reuid nobody --regid nogroup --clear-groups mkfifo -m 600 $fifo
ls -l $fifo
N=x16-$RANDOM
timeout 10 $ML run -v $N -- echo the job ran >$ADV_T/x16.out 2>$ADV_T/x16.err &
R=$!; sleep 11; st=$(awk "{print \$3}" /proc/$(pgrep -P $R)/stat 2>/dev/null); wc=$(cat /proc/$(pgrep -P $R)/wchan 2>/dev/null)
echo "after 11s and timeout(1)'s SIGTERM: mongolock state ${st:-gone}, in ${wc:-?}"; kill -KILL $(pgrep -P $R) 2>/dev/null; wait $R; rc=$?
echo "run: exit $rc (137: SIGKILLed by this script after SIGTERM did nothing); output: [$(cat $ADV_T/x16.out)]"
tail -2 $ADV_T/x16.err | sed 's/^/    /'
timeout -s KILL 10 $ML acquire $N-acq >/dev/null 2>&1; echo "acquire (no holder file): exit $?"; $ML release $N-acq >/dev/null 2>&1
rm -f $fifo
timeout -s KILL 10 $ML run $N -- echo the job ran; echo "run after removing the FIFO: exit $?"
