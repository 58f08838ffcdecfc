#!/bin/bash
# bounded --wait on the replacing run, shorter than the holder's stop (job ignores SIGTERM, kill grace 1s)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=wt-$RANDOM; F=out/wt.h; rm -f $F
t0=$(ts)
$ML run $N $TIMING --replace -- $(job $F --seconds 30 --ignore-term) >out/wt-h.err 2>&1 & h=$!
sleep 1.5
host host-b $ML run $N $TIMING --replace --wait ${RW:-700ms} -- $(job $F --seconds 2) >out/wt-r.err 2>&1; echo "R exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/wt-r.err)"
wait $h; echo "H exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/wt-h.err)"
$ML history $N --limit 5 | cut -c1-150
python3 $HOLDERS_PY check $F --gap-ms 200 --min-holders 1 | tail -2
