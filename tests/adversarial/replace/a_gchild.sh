#!/bin/bash
# replaceable holder whose job leaves a setsid'd grandchild ticker that ignores SIGTERM; main job exits at once on SIGTERM
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=gc-$RANDOM; F=out/gc.h; rm -f $F
t0=$(ts)
$ML run $N $TIMING --replace -- sh -c "setsid $(job $F --seconds 40 --ignore-term) & exec sleep 60" >out/gc-h.err 2>&1 & h=$!
sleep 1.5
host host-b $ML run $N $TIMING --replace -- $(job $F --seconds 2) >out/gc-r.err 2>&1; echo "R exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/gc-r.err)"
wait $h; echo "H exit $?: $(cat out/gc-h.err)"
python3 $HOLDERS_PY check $F --gap-ms 200
