#!/bin/bash
# message length with many long names
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
K=${K:-300}; P=$(head -c 190 /dev/zero | tr '\0' x)$RANDOM
names=(); for i in $(seq $K); do names+=("$P-$i"); done
t0=$(ts)
$ML run "${names[@]}" $TIMING --replace -- sleep 60 >out/many-h.err 2>&1 & h=$!
for i in $(seq 600); do $ML status "$P-$K" >/dev/null 2>&1 && break; sleep 0.1; done
echo "holder has all $K names at +$(echo "$(ts)-$t0"|bc)"
host host-b $ML run "${names[@]}" $TIMING --replace -- true >out/many-r.err 2>&1 & r=$!
sleep 0.2
host host-c $ML run "${names[@]}" $TIMING --replace -- true >out/many-r2.err 2>&1 & r2=$!
wait $h; echo "H exit $? at +$(echo "$(ts)-$t0"|bc); stderr bytes $(wc -c < out/many-h.err), longest line $(awk '{ if (length>m) m=length } END {print m}' out/many-h.err)"
wait $r; echo "R exit $?; stderr bytes $(wc -c < out/many-r.err), longest line $(awk '{ if (length>m) m=length } END {print m}' out/many-r.err)"
wait $r2; echo "R2 exit $? at +$(echo "$(ts)-$t0"|bc); stderr bytes $(wc -c < out/many-r2.err)"
cut -c1-300 out/many-h.err out/many-r.err out/many-r2.err
