#!/bin/bash
# a replacing run inside the job of a replacing holder of the same name
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
N=nest-$RANDOM; F=out/nest.h; rm -f $F
t0=$(ts)
timeout 60 $ML run $N $TIMING --replace -- sh -c "$(job $F --seconds 1); exec $ML run $N $TIMING --replace -- $(job $F --seconds 2)" >out/nest.err 2>&1
echo "outer exit $? after $(echo "$(ts)-$t0"|bc)s"; cat out/nest.err
python3 $HOLDERS_PY check $F --gap-ms 200 --min-holders 1
