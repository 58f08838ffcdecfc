#!/usr/bin/env bash
# A2b: a listIndexes that never answers, against the bounds a caller sets: acquire --wait 2s, run --wait 2s,
# --connect-timeout 1s, run --timeout 3s (HEAD vs baseline, whose createIndexes is not retried).
source "$(dirname "$0")/lib.sh"
fp_start
C=a2b_$RANDOM; export MONGOLOCK_COLLECTION=$C
"$ML" --uri "$RT12_URI" --collection "$C" init >/dev/null 2>&1
cases=("acquire N --wait 2s" "--connect-timeout 1s acquire N" "run N --wait 2s -- true" "run N --timeout 3s -- true")
for c in "${cases[@]}"; do
  for bin in "$ML" "$ML_BASE"; do
    m=listIndexes; [[ $bin == "$ML_BASE" ]] && m=createIndexes
    proxy fail $m times 3 hang
    t0=${EPOCHREALTIME/./}
    # shellcheck disable=SC2086
    timeout 90 "$bin" --uri "$FP_URI" --collection "$C" ${c//N/n$RANDOM} >"$W/out" 2>"$W/err"; rc=$?
    t1=${EPOCHREALTIME/./}
    proxy clear
    printf '%-34s %-8s rc=%-3s %6d ms  %s\n' "$c" "$([[ $bin == "$ML" ]] && echo HEAD || echo baseline)" "$rc" \
      $(((t1 - t0) / 1000)) "$(tr '\n' ' ' <"$W/err" | head -c 120)"
  done
done
