#!/usr/bin/env bash
# X5 (adversarial, not accidental): a process that reuses the holder's pid with a forged start. In one
# container, the holder's shell (pid P, start S) acquires and ends (a crashed script: the lock stays until its
# TTL). A later process gets pid P (ns_last_pid) and, through a new time namespace whose boottime offset
# shifts /proc/P/stat's start as its children read it, shows start S: its `release` (no token) matches
# the document's process, boot_id, pid_ns and pid_start. Needs root over the container's namespaces,
# which could name any holder with --process anyway; shown to bound what pid_start proves.
# Usage: x5_forged_start.sh [N]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${1:-2}; k=0
for t in $(seq $n); do
  N=x5-$t-$RANDOM
  unshare --uts --pid --fork --mount-proc sh -c "hostname vm
    sh -c 'echo \$\$ \$(cut -d\" \" -f22 /proc/\$\$/stat) >$ADV_T/x5.holder; $ML acquire $N >/dev/null'
    read P S <$ADV_T/x5.holder
    sleep 0.3
    python3 $RT_DIR/x5_forged_start.py \$P \$S sh -c '$ML release $N; exit \$?'; echo \$? >$ADV_T/x5.rc" 2>$ADV_T/x5.err
  echo "trial $t: holder $(cat $ADV_T/x5.holder) (pid start); later process's release exit $(cat $ADV_T/x5.rc) $(head -1 $ADV_T/x5.err); lock now: $(field $N process)"
  [[ $(cat $ADV_T/x5.rc) == 0 ]] && k=$((k + 1))
  $ML release $N --process vm:$(cut -d' ' -f1 $ADV_T/x5.holder) 2>/dev/null
done
echo "X5 RESULT: a later process with the holder's pid and a forged start released its lock in $k of $n"
