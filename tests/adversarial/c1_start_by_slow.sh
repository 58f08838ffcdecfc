#!/usr/bin/env bash
# C1: start_by: `run a b c` through a proxy that delays every message DELAY ms (slow server), so the
# acquisitions take longer than the first lock's renew deadline; a host-b contender takes name a as
# soon as it may. The run must exit 76 with nothing started.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
D=${2:-400}
P=$ADV_T/proxyc1; rm -rf $P; 
python3 $REPO/tests/integration/faultproxy.py serve $ADV_T/c1.port $SERVER_PORT $P 2>$ADV_T/c1proxy.log &
PX=$!; while [[ ! -s $ADV_T/c1.port ]]; do sleep 0.05; done
PURI=mongodb://127.0.0.1:$(cat $ADV_T/c1.port)/
for t in $(seq 1 ${1:-2}); do
  rm -f $ADV_T/c1.port.x
  python3 $REPO/tests/integration/faultproxy.py ctl $P delay $D >/dev/null
  b=c1-$t-$RANDOM; F=$ADV_T/c1-$t.holders; rm -f $F
  t0=$(now)
  MONGOLOCK_URI=$PURI $ML run $b-a $b-b $b-c $b-d --ttl 3s --renew-interval 1s --kill-grace 700ms -- python3 $HOLDERS_PY job $F --seconds 3 >$ADV_T/c1-h1.log 2>&1 &
  H=$!
  unshare -u bash -c "hostname host-b; $ML run $b-a --wait 20s -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/c1-h2.log 2>&1 &
  C=$!
  wait $H; rh=$?; wait $C; rc=$?
  echo "trial $t delay ${D}ms: holder rc=$rh ($(echo "$(now) - $t0" | bc)s) contender rc=$rc; $(python3 check.py $F | tail -1)"
  grep -h 'error\|warning' $ADV_T/c1-h1.log | head -2
  python3 $REPO/tests/integration/faultproxy.py ctl $P pass >/dev/null
done
kill $PX
