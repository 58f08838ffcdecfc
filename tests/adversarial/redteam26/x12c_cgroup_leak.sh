#!/usr/bin/env bash
# X12c: mongolock killed (SIGKILL) while its job runs in its own cgroup: the guardian stops the job and releases
# (item 12) and removes the holder file, but is the job's (now empty) cgroup removed? Nothing else ever will
# (the sweep finds groups through holder files only). Usage: x12c_cgroup_leak.sh [N]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-3}; k=0
for t in $(seq $n); do
  N=x12c-$RANDOM
  $ML run -v $N -- sleep 30 2>$ADV_T/h.err & R=$!
  sleep 1; g=$(sed -n 's/.*; its cgroup \(\/.*\))$/\1/p' $ADV_T/h.err)
  kill -KILL $R; wait $R 2>/dev/null; sleep 2
  if [[ -d $g ]]; then k=$((k + 1)); echo "trial $t: $g left behind ($(grep populated $g/cgroup.events)); holder file $(ls /dev/shm/mongolock-run-$R-* 2>/dev/null || echo removed)"; rmdir $g; else echo "trial $t: removed"; fi
done
echo "X12c RESULT: empty job cgroup leaked in $k of $n"
