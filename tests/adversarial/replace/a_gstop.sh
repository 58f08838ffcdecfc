#!/bin/bash
# SIGSTOP of the holder's guardian only, right after the holder says it is replaced (job ignores SIGTERM)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=gs-$RANDOM; F=out/gs.h; rm -f $F
t0=$(ts)
$ML run $N $TIMING --replace -- $(job $F --seconds 40 --ignore-term) >out/gs-h.err 2>&1 & h=$!
sleep 1
g=$(pgrep -P $h | head -1); echo "guardian $g"
host host-b timeout 30 $ML run $N $TIMING --replace -- $(job $F --seconds 2) >out/gs-r.err 2>&1 & r=$!
for i in $(seq 300); do grep -q 'replaced' out/gs-h.err && break; sleep 0.005; done
kill -STOP $g; echo "guardian stopped at +$(echo "$(ts)-$t0"|bc)"
sleep ${GS:-8}; kill -CONT $g; echo "guardian continued at +$(echo "$(ts)-$t0"|bc)"
wait $r; echo "R exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/gs-r.err)"
wait $h; echo "H exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/gs-h.err)"
python3 $HOLDERS_PY check $F --gap-ms 200 --min-holders 1 | tail -4
