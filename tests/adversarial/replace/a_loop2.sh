#!/bin/bash
# two parallel loops of replacing runs (job exits at once) and a normal waiter W (--wait 10s) that joins mid-loop
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=lp2-$RANDOM; F=out/lp2.h; rm -f $F out/lp2-r*.err
loop() { local c=""; for i in $(seq 25); do host host-$1 $ML run $N $TIMING --replace -- $(job $F --seconds 0) >>out/lp2-r$1.err 2>&1; c+="$? "; done; echo "loop $1 codes: $(echo $c | tr ' ' '\n' | sort | uniq -c | tr '\n' ' ')"; }
t0=$(ts)
loop b & l1=$!
loop d & l2=$!
sleep 2
host host-c $ML run $N $TIMING --wait 10s -- $(job $F --seconds 1) >out/lp2-w.err 2>&1; echo "W exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/lp2-w.err)"
wait $l1 $l2; echo "loops done at +$(echo "$(ts)-$t0"|bc)"
python3 $HOLDERS_PY check $F --gap-ms 200 | grep -v 'host-[bd]'
sort out/lp2-r*.err | uniq -c | sed 's/lp2-[0-9]*/N/' | head
