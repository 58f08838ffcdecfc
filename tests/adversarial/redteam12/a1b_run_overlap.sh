#!/usr/bin/env bash
# A1b: A1 with two `run` jobs (different hosts' --process is implicit: two processes) that record start/end
# times: a non-unique program_1 on FerretDB, listIndexes answered "database is locked (517)" (error 1, as
# FerretDB's SQLite backend answers under contention) once per process; overlap of the two jobs in ms.
# Usage: a1b_run_overlap.sh [N]
source "$(dirname "$0")/lib.sh"
N=${1:-5}; fp_start; bad=0
for i in $(seq "$N"); do
  C=a1b_${i}_$RANDOM; export MONGOLOCK_COLLECTION=$C
  raw "{'createIndexes':'$C','indexes':[{'key':{'program':Int32(1)},'name':'program_1'}]}" >/dev/null
  proxy fail listIndexes times 2 error 1 msg database is locked "(517)" 2>/dev/null
  for k in 1 2; do
    "$ML" --uri "$FP_URI" --collection "$C" run job -- sh -c "echo start \${EPOCHREALTIME:-\$(date +%s.%N)} >>$W/t$k; sleep 2; date +'end %s.%N' >>$W/t$k" \
      >/dev/null 2>"$W/e$k" & p[k]=$!
    sleep 0.2
  done
  wait "${p[1]}"; r1=$?; wait "${p[2]}"; r2=$?
  proxy clear 2>/dev/null
  ov=$(python3 - "$W/t1" "$W/t2" <<'PY'
import sys
def span(p):
    try:
        d = dict(l.split() for l in open(p))
        return float(d["start"]), float(d["end"])
    except Exception:
        return None
a, b = span(sys.argv[1]), span(sys.argv[2])
print(0 if not a or not b else max(0, int((min(a[1], b[1]) - max(a[0], b[0])) * 1000)))
PY
)
  rm -f "$W/t1" "$W/t2"
  echo "run $i: rc $r1 $r2, overlap ${ov} ms"
  ((ov > 0)) && bad=$((bad + 1))
done
echo "== two jobs at once in $bad of $N runs"
