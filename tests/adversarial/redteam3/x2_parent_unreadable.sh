#!/usr/bin/env bash
# X2: acquire cannot read where its caller runs, so the document records less than the caller's identity,
# and `{field: {$in: [value, null]}}` lets a caller of another container match it.
#  hidepid: /proc mounted hidepid=2 in the container (a hardened runtime), acquire run as another user
#           than its calling shell (gosu/su-exec/setpriv, as entrypoints do): process_start(ppid) fails,
#           so boot_id, pid_ns and pid_start are all missing. Another container's PID-1 shell (root, plain
#           /proc, "vm:1") releases the lock: 0.
#  uid:     the same without hidepid: /proc/PPID/ns/pid is not readable by another uid (ptrace access),
#           so pid_ns is missing and only boot_id + pid_start remain. Two containers whose PID 1 started in
#           the same clock tick (10 ms; started together, as compose or a node reboot does) then match.
#           Counted only over trials where the two PID 1 started in the same tick.
# Usage: x2_parent_unreadable.sh [N] [hidepid|uid]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-3}; how=${2:-hidepid}; k=0; eligible=0
as_app='setpriv --reuid=65534 --regid=65534 --clear-groups'
for t in $(seq $n); do
  N=x2-$t-$RANDOM; G=$ADV_T/x2.go; rm -f $G $ADV_T/x2.[ab].*
  hp=; [[ $how == hidepid ]] && hp='mount -o remount,hidepid=2 /proc;'
  # Container A: PID-1 shell (root) runs the job's acquire as user nobody; container B: PID-1 shell (root)
  # runs release. Both started together, B's release once A has acquired.
  unshare --uts --pid --fork --mount-proc sh -c "hostname vm; $hp cut -d' ' -f22 /proc/1/stat >$ADV_T/x2.a.start
    $as_app $ML acquire $N >$ADV_T/x2.a.tok 2>$ADV_T/x2.a.err; r=\$?; python3 $MONGO_PY doc $N | grep -E '^(process|boot_id|pid_ns|pid_start)=' | tr '\\n' ' ' >$ADV_T/x2.a.doc; echo \$r >$ADV_T/x2.a.rc; sleep 3" &
  A=$!
  unshare --uts --pid --fork --mount-proc sh -c "hostname vm; cut -d' ' -f22 /proc/1/stat >$ADV_T/x2.b.start
    while [ ! -e $ADV_T/x2.a.rc ]; do sleep 0.05; done
    $ML release $N 2>$ADV_T/x2.b.err; echo \$? >$ADV_T/x2.b.rc" &
  B=$!
  wait $B
  sa=$(cat $ADV_T/x2.a.start); sb=$(cat $ADV_T/x2.b.start)
  echo "trial $t ($how): A acquire exit $(cat $ADV_T/x2.a.rc) [doc: $(cat $ADV_T/x2.a.doc 2>/dev/null)], PID-1 starts A=$sa B=$sb; B release exit $(cat $ADV_T/x2.b.rc) $(head -1 $ADV_T/x2.b.err)"
  same=0; [[ $how == hidepid || $sa == "$sb" ]] && same=1 && eligible=$((eligible + 1))
  [[ $same == 1 && $(cat $ADV_T/x2.b.rc) == 0 ]] && k=$((k + 1))
  wait $A
  $ML release $N --process vm:1 >/dev/null 2>&1
done
echo "X2 RESULT ($how): another container's release freed the lock in $k of $eligible (of $n trials, $eligible with equal PID-1 starts or hidepid)"
