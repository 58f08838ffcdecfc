#!/bin/bash
# a replacing run whose job exits at once, 50 times in a row, while a normal --wait waiter waits
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=lp-$RANDOM; F=out/lp.h; rm -f $F
$ML run $N $TIMING --replace -- $(job $F --seconds 3) >out/lp-h.err 2>&1 & h=$!
sleep 1
t0=$(ts)
host host-c $ML run $N $TIMING --wait ${WW:-40s} -- $(job $F --seconds 1) >out/lp-w.err 2>&1 & w=$!
sleep 0.3
codes=""
for i in $(seq ${LOOPS:-50}); do
  host host-b $ML run $N $TIMING --replace -- $(job $F --seconds 0) >>out/lp-r.err 2>&1; codes+="$? "
done
echo "replacer loop done at +$(echo "$(ts)-$t0"|bc)s; exit codes: $(echo $codes | tr ' ' '\n' | sort | uniq -c | tr '\n' ' ')"
wait $w; echo "W exit $? at +$(echo "$(ts)-$t0"|bc): $(cat out/lp-w.err)"
wait $h; echo "H exit $?: $(cat out/lp-h.err)"
python3 $HOLDERS_PY check $F --gap-ms 200 | tail -3
