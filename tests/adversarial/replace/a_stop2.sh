#!/bin/bash
# older replacer R1 stalls (SIGSTOP > ticket lease) while a non-replaceable holder H runs; newer replacer R2 joins meanwhile; R1 continued.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=st2-$RANDOM; F=out/st2.h; rm -f $F
$ML run $N $TIMING -- $(job $F --seconds ${HSEC:-14}) >out/st2-h.err 2>&1 & h=$!
sleep 1
host host-b $ML -v run $N $TIMING --replace -- $(job $F --seconds 2) >out/st2-r1.err 2>&1 & r1=$!
for i in $(seq 300); do grep -q 'joined the queue' out/st2-r1.err && break; sleep 0.01; done
rp=$(pgrep -f "mongolock -v run $N" | head -1); kill -STOP $rp; echo "R1 $rp stopped: $(grep 'joined' out/st2-r1.err|cut -c1-120)"
sleep ${GAP:-1}
host host-c $ML -v run $N $TIMING --replace -- $(job $F --seconds 2) >out/st2-r2.err 2>&1 & r2=$!
for i in $(seq 300); do grep -q 'joined the queue' out/st2-r2.err && break; sleep 0.01; done
echo "R2: $(grep 'joined' out/st2-r2.err|cut -c1-120)"
sleep ${STOPS:-6}
kill -CONT $rp; echo cont
wait $r1; echo "R1 exit $?: $(grep -v '\[' out/st2-r1.err)"; grep 'joined' out/st2-r1.err | cut -c1-150
wait $r2; echo "R2 exit $?: $(grep -v '\[' out/st2-r2.err)"
wait $h; echo "H exit $?: $(cat out/st2-h.err)"
python3 $HOLDERS_PY check $F --gap-ms 200
