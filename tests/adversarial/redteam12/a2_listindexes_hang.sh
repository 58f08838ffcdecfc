#!/usr/bin/env bash
# A2: listIndexes never answered (hang), its reply lost, the connection closed before/after it, or delayed:
# is the acquisition's time bound kept (operation timeout; compare the baseline's createIndexes), which exit
# code and message, and does a later acquire still work.
source "$(dirname "$0")/lib.sh"
fp_start
C=a2_$RANDOM; export MONGOLOCK_COLLECTION=$C
"$ML" --uri "$RT12_URI" --collection "$C" init >/dev/null 2>&1
for fault in hang lose-reply close-before close-after "delay 3000" "delay 12000"; do
  for bin in "$ML" "$ML_BASE"; do
    m=listIndexes; [[ $bin == "$ML_BASE" ]] && m=createIndexes
    proxy fail $m times 3 $fault
    t0=${EPOCHREALTIME/./}
    timeout 60 "$bin" --uri "$FP_URI" --collection "$C" acquire "j$RANDOM" --process h:1 >"$W/out" 2>"$W/err"; rc=$?
    t1=${EPOCHREALTIME/./}
    proxy clear
    printf '%-14s %-8s rc=%-3s %6d ms  %s\n' "$fault" "$([[ $bin == "$ML" ]] && echo HEAD || echo baseline)" "$rc" \
      $(((t1 - t0) / 1000)) "$(tr '\n' ' ' <"$W/err" | head -c 200)"
  done
done
