#!/usr/bin/env bash
# A6: the queue's index name_1_seq_1 made NON-unique by hand on C_queue: a `run --wait` waiter (the lock held)
# is refused how (exit, message: the message speaks of "the exclusion" and "two holders", for a fairness index)?
# And doctor's view of it.
source "$(dirname "$0")/lib.sh"
C=a6_$RANDOM; export MONGOLOCK_COLLECTION=$C
"$ML" --uri "$RT12_URI" --collection "$C" init >/dev/null 2>&1
raw "{'createIndexes':'${C}_queue','indexes':[{'key':{'name':Int32(1),'seq':Int32(1)},'name':'name_1_seq_1'}]}"
"$ML" --uri "$RT12_URI" --collection "$C" acquire job --process a:1 >/dev/null; echo "holder: rc=$?"
timeout 30 "$ML" --uri "$RT12_URI" --collection "$C" run job --wait 3s -- true 2>"$W/err"; echo "waiter: rc=$?"; cat "$W/err"
"$ML" --uri "$RT12_URI" --collection "$C" doctor 2>&1 | grep -i "queue\|index"
