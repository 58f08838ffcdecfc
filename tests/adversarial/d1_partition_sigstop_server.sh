#!/usr/bin/env bash
# D1: the holder talks through faultproxy; host-b talks to the server directly.
#  hold:  partition the holder 4.5 s (then pass: every held request is delivered late)
#  sstop: SIGSTOP FerretDB itself 4.5 s (every client stalls, requests queue in socket buffers)
#  delay: every message 700 ms late (RTT 1.4 s > renew interval) for 6 s
set -u
source "$(dirname "${BASH_SOURCE[0]}")/srv.sh"
srv_running || srv_start
mode=$1; t=${2:-1}
P=$ADV_T/proxyd1-$mode-$t; rm -rf $P $ADV_T/d1.port
python3 $REPO/tests/integration/faultproxy.py serve $ADV_T/d1.port $SERVER_PORT $P 2>$ADV_T/d1proxy.log &
PX=$!; while [[ ! -s $ADV_T/d1.port ]]; do sleep 0.05; done
PURI=mongodb://127.0.0.1:$(cat $ADV_T/d1.port)/
N=d1$mode-$t-$RANDOM; F=$ADV_T/d1$mode-$t.holders; rm -f $F
MONGOLOCK_URI=$PURI $ML run $N --ttl 3s --renew-interval 1s --kill-grace 700ms -- python3 $HOLDERS_PY job $F --seconds 12 >$ADV_T/d1-h1.log 2>&1 &
H=$!; sleep 1.7
unshare -u bash -c "hostname host-b; $ML run $N --wait 30s -- python3 $HOLDERS_PY job $F --seconds 2" >$ADV_T/d1-h2.log 2>&1 &
C=$!
case $mode in
hold) python3 $REPO/tests/integration/faultproxy.py ctl $P hold >/dev/null; sleep 4.5; python3 $REPO/tests/integration/faultproxy.py ctl $P pass >/dev/null ;;
sstop) kill -STOP $(cat $ADV_T/server.pid); sleep 4.5; kill -CONT $(cat $ADV_T/server.pid) ;;
delay) python3 $REPO/tests/integration/faultproxy.py ctl $P delay 700 >/dev/null; sleep 6; python3 $REPO/tests/integration/faultproxy.py ctl $P pass >/dev/null ;;
esac
wait $H; rh=$?; wait $C; rc=$?
echo "$mode trial $t: holder rc=$rh contender rc=$rc; $(python3 check.py $F | tail -1)"
grep -h error $ADV_T/d1-h1.log | cut -c1-200
kill $PX
