#!/bin/bash
# replacer SIGSTOPped right after joining the queue, SIGCONT after > TTL; a normal waiter W queued too.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=st-$RANDOM; F=out/st.h; rm -f $F
$ML run $N $TIMING --replace -- $(job $F --seconds ${HSEC:-30}) >out/st-h.err 2>&1 & h=$!
sleep 1.5
host host-c $ML run $N $TIMING ${WREP:-} --wait 60s -- $(job $F --seconds 4) >out/st-w.err 2>&1 & w=$!
sleep 0.5
host host-b $ML -v run $N $TIMING --replace -- $(job $F --seconds 2) >out/st-r.err 2>&1 & r=$!
# wait for the replacer to have inserted its ticket
for i in $(seq 200); do grep -q -i 'queue\|ticket' out/st-r.err && break; sleep 0.01; done
rp=$(pgrep -f "mongolock -v run $N" | head -1); kill -STOP $rp; echo "stopped R at $(ts) after: $(tail -1 out/st-r.err | cut -c1-150)"
sleep ${STOPS:-8}
kill -CONT $rp; echo "cont R at $(ts)"
wait $r; echo "R exit $?: $(grep -v '\[' out/st-r.err)"
wait $w; echo "W exit $?: $(cat out/st-w.err)"
wait $h; echo "H exit $?: $(cat out/st-h.err)"
python3 $HOLDERS_PY check $F --gap-ms 200
