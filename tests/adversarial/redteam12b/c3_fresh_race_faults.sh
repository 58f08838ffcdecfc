#!/usr/bin/env bash
# c3: K acquires of one name at once (distinct --process) on a fresh collection through failproxy, with
# faults on the index commands of the first runs. Counts the lock documents of `job` (more than 1 = two
# holders) and the exit codes. Rule sets (one per line in RULES); optionally an operator who makes a
# non-unique program_1 in the middle of the race (OP=1).
# Usage: c3_fresh_race_faults.sh [N] [K]
set -u
source "$(dirname "$0")/lib.sh"
N=${1:-4}; K=${2:-10}
fp_start
RULES=(
  "fail createIndexes times 3 close-after"
  "fail createIndexes times 3 error 1 msg database is locked (517)"
  "fail listIndexes times 4 error 26"
  "fail listIndexes times 4 error 13"
  "fail createIndexes times 4 delay 300"
  "fail listIndexes times 6 delay 200"
)
bad=0; total=0
for rules in "${RULES[@]}"; do
  for op in 0 1; do
    worst=0; hist=""
    for i in $(seq "$N"); do
      fresh c3
      proxy clear 2>/dev/null
      proxy $rules 2>/dev/null
      pids=()
      for k in $(seq "$K"); do "$ML" --uri "$FP_URI" acquire job --process "p$k:$k" >/dev/null 2>"$W/e$k" & pids+=($!); done
      if [[ $op == 1 ]]; then sleep 0.05; python3 "$MONGO_PY" index "" program_1 program >/dev/null 2>&1; fi
      codes=""; for p in "${pids[@]}"; do wait "$p"; codes+="$? "; done
      d=$(ndocs); total=$((total+1)); [[ $d -gt 1 ]] && bad=$((bad+1)); (( d > worst )) && worst=$d
      hist+="[$(tr ' ' '\n' <<<"$codes" | grep . | sort | uniq -c | awk '{printf "%sx%s ", $1, $2}')docs=$d] "
    done
    echo "$rules; operator=$op: max docs $worst; $hist"
  done
done
echo "rounds with two or more holders: $bad of $total"
grep -h . "$W"/e* | sed 's/rt12b_c3_[0-9]*/C/g' | cut -c1-200 | sort | uniq -c | sort -rn | head -8
