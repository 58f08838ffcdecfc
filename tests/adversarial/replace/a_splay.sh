#!/bin/bash
# replace while another replacing run is still inside --splay
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=splayname; F=out/spl.h; rm -f $F
$ML status $N >/dev/null 2>&1 && $ML break $N --force >/dev/null 2>&1
t0=$(ts)
$ML run $N $TIMING --replace -- $(job $F --seconds 30) >out/spl-h.err 2>&1 & h=$!
sleep 0.5
host s8 $ML run $N $TIMING --replace --splay 8s -- $(job $F --seconds 3) >out/spl-s.err 2>&1 & s=$!
sleep 1
host host-b $ML run $N $TIMING --replace -- $(job $F --seconds 10) >out/spl-r.err 2>&1 & r=$!
wait $s; echo "S (started +0.5, splay 5.3s) exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/spl-s.err)"
wait $r; echo "R (started +1.5, no splay) exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/spl-r.err)"
wait $h; echo "H exit $?: $(cat out/spl-h.err)"
python3 $HOLDERS_PY check $F --gap-ms 200
