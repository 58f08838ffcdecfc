#!/bin/bash
# kill -9 FerretDB mid-replacement (while the replaceable holder stops its job), restart after $DOWN s
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=sk-$RANDOM; F=out/sk.h; rm -f $F
$ML run $N $TIMING --replace -- $(job $F --seconds 30 ${IGN:+--ignore-term}) >out/sk-h.err 2>&1 & h=$!
sleep 1.5
host host-c $ML run $N $TIMING --wait 60s -- $(job $F --seconds 2) >out/sk-w.err 2>&1 & w=$!
sleep 0.3
t0=$(ts)
host host-b $ML run $N $TIMING --replace ${RW:-} -- $(job $F --seconds 2) >out/sk-r.err 2>&1 & r=$!
for i in $(seq 300); do grep -q 'replaced' out/sk-h.err && break; sleep 0.01; done
sleep ${AFTER:-0}
srv_kill; echo "server killed at +$(echo "$(ts)-$t0"|bc)"
sleep ${DOWN:-3}
srv_start; echo "server up at +$(echo "$(ts)-$t0"|bc)"
wait $r; echo "R exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/sk-r.err | cut -c1-250)"
wait $w; echo "W exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/sk-w.err | cut -c1-250)"
wait $h; echo "H exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/sk-h.err | cut -c1-250)"
python3 $HOLDERS_PY check $F --gap-ms 200
