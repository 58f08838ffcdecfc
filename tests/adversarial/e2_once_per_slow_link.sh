#!/usr/bin/env bash
# E2: --once-per decided while holding the lock, but the "ok" is recorded only after the release. Host A
# talks through a proxy whose messages get 300 ms late just as its job ends (a slow link); host-b runs
# the same `run --once-per 1h` every ~50 ms (cron on several hosts, a little apart). Expected: the job
# runs once; observed: host-b acquires right after A's release, finds no recent success, runs it again.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
P=$ADV_T/proxye2; rm -rf $P $ADV_T/e2.port
python3 $REPO/tests/integration/faultproxy.py serve $ADV_T/e2.port $SERVER_PORT $P 2>$ADV_T/e2proxy.log &
PX=$!; while [[ ! -s $ADV_T/e2.port ]]; do sleep 0.05; done
PURI=mongodb://127.0.0.1:$(cat $ADV_T/e2.port)/
CTL="python3 $REPO/tests/integration/faultproxy.py ctl $P"
twice=0
for t in $(seq 1 ${1:-5}); do
  $CTL pass >/dev/null
  N=e2-$t-$RANDOM; F=$ADV_T/e2-$t.cnt; rm -f $F
  MONGOLOCK_URI=$PURI $ML -q run $N --once-per 1h -- bash -c "echo A \$(date +%s.%N) >>$F; sleep 1; $CTL delay 300 >/dev/null" &
  A=$!; sleep 0.3
  unshare -u bash -c "hostname host-b; for i in \$(seq 1 60); do $ML -q run $N --once-per 1h -- bash -c 'echo B \$(date +%s.%N) >>$F'; [ \$? = 75 ] || break; sleep 0.05; done" 
  wait $A
  n=$(wc -l <$F); [[ $n -gt 1 ]] && twice=$((twice+1))
  echo "trial $t: job ran $n time(s): $(tr '\n' ' ' <$F)"
done
echo "twice within --once-per 1h: $twice of ${1:-5}"
kill $PX
