#!/bin/bash
# holder: --replace --on-lost ignore ; replacer from host-b
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=ign-$RANDOM; F=out/ign.holders; rm -f $F
$ML run $N $TIMING --replace --on-lost ${ONLOST:-ignore} -- $(job $F --seconds 20) >out/ign-h.err 2>&1 & h=$!
sleep 1.5
t0=$(ts)
host host-b timeout 60 $ML run $N $TIMING --replace -- $(job $F --seconds 2) >out/ign-b.err 2>&1; rb=$?
echo "replacer exit $rb after $(echo "$(ts)-$t0"|bc)s"; cat out/ign-b.err
wait $h; echo "holder exit $?"; cat out/ign-h.err
chk $F
