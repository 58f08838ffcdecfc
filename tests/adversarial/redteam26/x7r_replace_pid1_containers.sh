#!/usr/bin/env bash
# X7r (item 7): two "containers" sharing the host name (same UTS), mongolock PID 1 in each (both vm:1): the
# second `run --replace` must stop the first's job (itself started with --replace) and run.
# Variant plain: the first run without --replace (never stopped, by design: the newer waits and exits 75);
# look at the newer run's message: it calls the other container's vm:1 "this caller's own identity".
# Usage: x7r_replace_pid1_containers.sh [N] [replace|plain]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; first=${2:-replace}; k=0; fopt=; [[ $first == replace ]] && fopt=--replace
for t in $(seq $n); do
  N=x7r-$t-$RANDOM; F=$ADV_T/x7r-$t.holders; rm -f $F
  unshare -pf --mount-proc $ML run $N $fopt -- python3 $HOLDERS_PY job $F --seconds 20 >$ADV_T/a.out 2>$ADV_T/a.err & A=$!
  sleep 1.5
  unshare -pf --mount-proc $ML run $N --replace --wait 8s -- python3 $HOLDERS_PY job $F --seconds 2 >$ADV_T/b.out 2>$ADV_T/b.err; rb=$?
  wait $A; ra=$?
  ov=$(overlap $F)
  echo "trial $t ($first): first exit $ra, replacing exit $rb; $ov"
  sed 's/^/    newer: /' $ADV_T/b.err | head -2
  [[ $rb == 0 && $ov == *max_cross_run_overlap_ms=0.0* ]] && k=$((k + 1))
  cleanup_jobs $F
done
echo "X7r RESULT ($first): replaced without overlap in $k of $n"
