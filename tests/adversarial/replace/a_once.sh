#!/bin/bash
# --once-per with --replace: replacing runs every 0.15s, each job 0.5s; at most one run may end ok per DUR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=op-$RANDOM; F=out/op.h; rm -f $F out/op-r.err
pids=()
for i in $(seq ${K:-25}); do
  host host-$i $ML run $N $TIMING --replace --once-per 1h -- $(job $F --seconds ${JS:-0.5}) >>out/op-r.err 2>&1 & pids+=($!)
  sleep ${GAP:-0.15}
done
codes=""; for p in "${pids[@]}"; do wait $p; codes+="$? "; done
echo "exit codes: $(echo $codes | tr ' ' '\n' | sort | uniq -c | tr '\n' ' ')"
$ML history $N --limit 100 | tail -1
echo "jobs that ran to their end (>= ${JS:-0.5}s): $(python3 $HOLDERS_PY check $F --gap-ms 200 | awk '/^holder/{split($5,a," "); s=$5; e=$7; if (e-s >= 490) n++} END{print n+0}')"
python3 $HOLDERS_PY check $F --gap-ms 200 | tail -1
sort out/op-r.err | sed 's/op-[0-9]*/N/; s/host-[0-9]*:[0-9]*/H/; s/[0-9.]*[mh]*s ago/X ago/' | uniq -c | sort -rn | head
