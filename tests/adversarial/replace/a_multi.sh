#!/bin/bash
# multi-name replacement: H1 holds {A,B} --replace; H2 holds C (not replaceable, 6s); R replaces {B,C}; W waits for A.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
S=$RANDOM; A=ma$S; B=mb$S; C=mc$S
FA=out/mA.h FB=out/mB.h FC=out/mC.h; rm -f $FA $FB $FC
two() { echo sh -c "\"\$0\" \"\$@\" & p=\$!; $(job $1 --seconds $3) & q=\$!; trap 'kill -TERM \$p \$q' TERM; wait \$p; wait \$q" $(job $2 --seconds $3); }
# job for A and B: two tickers
$ML run $A $B $TIMING --replace -- "$RT_DIR"/multijob.sh 30 $FA $FB >out/m-h1.err 2>&1 & h1=$!
$ML run $C $TIMING -- $(job $FC --seconds 6) >out/m-h2.err 2>&1 & h2=$!
sleep 1.5
t0=$(ts)
host host-b $ML run $B $C $TIMING --replace -- "$RT_DIR"/multijob.sh 2 $FB $FC >out/m-r.err 2>&1 & r=$!
sleep 0.3
host host-c $ML run $A $TIMING --wait 30s -- $(job $FA --seconds 2) >out/m-w.err 2>&1 & w=$!
wait $r; echo "R exit $? after $(echo "$(ts)-$t0"|bc)s: $(cat out/m-r.err)"
wait $w; echo "W exit $?: $(cat out/m-w.err)"
wait $h1; echo "H1 exit $?: $(cat out/m-h1.err)"
wait $h2; echo "H2 exit $?: $(cat out/m-h2.err)"
for f in $FA $FB $FC; do echo "$f:"; chk $f; done
