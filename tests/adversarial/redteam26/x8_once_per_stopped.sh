#!/usr/bin/env bash
# X8 (item 8): host A's `run --once-per 1h --ttl 3s` job succeeds and, as it ends, A's mongolock is stopped
# (SIGSTOP by the job, standing for a VM pause / CPU starvation) for longer than TTL + grace. host-b then runs
# the same command: A's success was never recorded, so b runs (expected). A is continued: it must not record
# a success after its lease (exit 76, a true message), and the history must show what happened.
# Usage: x8_once_per_stopped.sh [N]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}
for t in $(seq $n); do
  N=x8-$t-$RANDOM; L=$ADV_T/x8-$t.log; rm -f $L
  $ML run $N --once-per 1h --ttl 3s -- sh -c "echo A >>$L; kill -STOP \$(ps -o ppid= -p \$PPID); exit 0" >$ADV_T/a.out 2>$ADV_T/a.err &
  A=$!
  sleep 6
  unshare -u sh -c "hostname host-b; exec $ML run $N --once-per 1h -- sh -c 'echo B >>$L'" 2>$ADV_T/b.err; rb=$?
  kill -CONT $A; wait $A; ra=$?
  sleep 0.5
  unshare -u sh -c "hostname host-b; exec $ML run $N --once-per 1h -- sh -c 'echo C >>$L'" 2>$ADV_T/c.err; rc=$?
  echo "trial $t: ran [$(tr '\n' ' ' <$L)] A exit $ra, host-b exit $rb, later host-b exit $rc"
  sed 's/^/    A: /' $ADV_T/a.err | head -3
  $ML history $N --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print("    history:", [(r.get("process"), r.get("outcome")) for r in (d if isinstance(d, list) else d.get("runs", []))])'
done
