#!/bin/bash
# replacing holder with --min-hold; replacer with and without --wait
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=mh-$RANDOM; F=out/mh.h; rm -f $F
t0=$(ts)
$ML run $N $TIMING --replace --min-hold ${MH:-12s} -- $(job $F --seconds 30) >out/mh-h.err 2>&1 & h=$!
sleep 1.5
host host-b $ML run $N $TIMING --replace ${RW:-} -- $(job $F --seconds 2) >out/mh-r.err 2>&1 & r=$!
sleep 0.5
host host-c $ML run $N $TIMING --wait 30s -- $(job $F --seconds 1) >out/mh-w.err 2>&1 & w=$!
wait $h; echo "H exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/mh-h.err)"
$ML status $N | grep -i 'state\|until\|released\|waiter\|[0-9]\.' 
wait $r; echo "R exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/mh-r.err)"
wait $w; echo "W exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/mh-w.err)"
python3 $HOLDERS_PY check $F --gap-ms 200
