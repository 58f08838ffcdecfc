#!/bin/bash
# attack 5 without a slow link: R1 stopped twice (once past its ticket lease, once right after its rejoin insert)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=b75b-$RANDOM; F=out/b75b.h; rm -f $F
T0=$(ts)
$ML run $N $TIMING -- $(job $F --seconds ${HSEC:-10}) >out/b75b-h.err 2>&1 & h=$!
sleep 1
host host-b $ML -v run $N $TIMING --replace -- $(job $F --seconds 2) >out/b75b-r1.err 2>&1 & r1=$!
for i in $(seq 500); do grep -q 'joined the queue' out/b75b-r1.err && break; sleep 0.01; done
rp=$(pgrep -f "mongolock -v run $N" | head -1); kill -STOP $rp
sleep 1
host host-c $ML -v run $N $TIMING --replace ${R2OPT:---no-push} -- $(job $F --seconds 2) >out/b75b-r2.err 2>&1 & r2=$!
sleep $(echo "${TC:-9.8} - ($(ts)-$T0)" | bc)
# watcher: SIGSTOP R1 again as soon as it logs its second join
python3 - $rp out/b75b-r1.err <<'PY' &
import os, sys, time, signal
pid, path = int(sys.argv[1]), sys.argv[2]
os.kill(pid, signal.SIGCONT)
t = time.time()
while time.time() - t < 5:
    if open(path).read().count("joined the queue") >= 2:
        os.kill(pid, signal.SIGSTOP); print("R1 re-stopped after its rejoin at +%.3f" % (time.time() - t)); time.sleep(3); os.kill(pid, signal.SIGCONT); break
    time.sleep(0.0002)
PY
wait $r1; echo "R1 exit $?: $(grep -v '\[' out/b75b-r1.err)"
wait $r2; echo "R2 exit $?: $(grep -v '\[' out/b75b-r2.err)"
wait $h; echo "H exit $?: $(cat out/b75b-h.err)"
grep -h 'joined\|queue: ' out/b75b-r1.err out/b75b-r2.err | cut -c1-120 | tail -6
python3 $HOLDERS_PY check $F --gap-ms 200 --min-holders 1 | tail -2
