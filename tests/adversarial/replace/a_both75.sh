#!/bin/bash
# Two replacing runs both exit 75 (nobody runs): R1 (older, slow link D ms) stalls past its ticket lease,
# R2 (newer, --no-push) waits at the head; R1's rejoin inserts a ticket below R2's for a moment, just as the
# non-replaceable holder H ends.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
D=${D:-600}; HSEC=${HSEC:-12}; TC=${TC:-9.5}
PP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$RT_DIR"/proxy.py $PP $SERVER_PORT $D & px=$!
sleep 0.5
N=b75-$RANDOM; F=out/b75.h; rm -f $F
T0=$(ts)
$ML run $N $TIMING -- $(job $F --seconds $HSEC) >out/b75-h.err 2>&1 & h=$!
sleep 1
MONGOLOCK_URI=mongodb://127.0.0.1:$PP/ host host-b $ML -v run $N $TIMING --replace -- $(job $F --seconds 2) >out/b75-r1.err 2>&1 & r1=$!
for i in $(seq 500); do grep -q 'joined the queue' out/b75-r1.err && break; sleep 0.01; done
rp=$(pgrep -f "mongolock -v run $N" | head -1); kill -STOP $rp
echo "R1 pid $rp stopped at +$(echo "$(ts)-$T0"|bc): $(grep joined out/b75-r1.err | cut -c1-100)"
sleep 1
host host-c $ML -v run $N $TIMING --replace --no-push -- $(job $F --seconds 2) >out/b75-r2.err 2>&1 & r2=$!
sleep $(echo "$TC - ($(ts)-$T0)" | bc)
kill -CONT $rp; echo "R1 continued at +$(echo "$(ts)-$T0"|bc)"
wait $r1; echo "R1 exit $?: $(grep -v '\[' out/b75-r1.err)"
wait $r2; echo "R2 exit $?: $(grep -v '\[' out/b75-r2.err)"
wait $h; echo "H exit $?: $(cat out/b75-h.err)"
kill $px
echo "H job end at +$(python3 -c "
import sys; l=[x.split() for x in open('$F') if x.startswith('end vm')]; print(int(l[-1][4])/1e9 - $T0)")"
grep 'joined' out/b75-r1.err out/b75-r2.err | cut -c1-140
python3 $HOLDERS_PY check $F --gap-ms 200
