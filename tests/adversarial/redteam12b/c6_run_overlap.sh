#!/usr/bin/env bash
# c6: c1's two-holder modes with two `run job -- (start; sleep 2; end)` jobs 0.2 s apart through rwproxy
# MODE over a non-unique program_1; overlap of the jobs in ms (round one's a1b method).
# Usage: c6_run_overlap.sh [N] [MODE]   (default 3, li13,nofdb)
set -u
source "$(dirname "$0")/lib.sh"
N=${1:-3}; MODE=${2:-li13,nofdb}; bad=0
for i in $(seq "$N"); do
  fresh c6; C=$MONGOLOCK_COLLECTION
  python3 "$MONGO_PY" index "" program_1 program >/dev/null
  rw_start "$MODE"
  for k in 1 2; do
    "$ML" --uri "$RW_URI" run job -- sh -c "date +'start %s.%N' >>$W/t$k; sleep 2; date +'end %s.%N' >>$W/t$k" \
      >/dev/null 2>"$W/e$k" & p[k]=$!
    sleep 0.2
  done
  wait "${p[1]}"; r1=$?; wait "${p[2]}"; r2=$?
  rw_stop
  ov=$(python3 - "$W/t1" "$W/t2" <<'PY'
import sys
def span(p):
    try:
        d = dict(l.split() for l in open(p)); return float(d["start"]), float(d["end"])
    except Exception:
        return None
a, b = span(sys.argv[1]), span(sys.argv[2])
print(0 if not a or not b else max(0, int((min(a[1], b[1]) - max(a[0], b[0])) * 1000)))
PY
)
  rm -f "$W/t1" "$W/t2"
  echo "[$MODE] run $i: rc $r1 $r2, overlap $ov ms"
  ((ov > 0)) && bad=$((bad + 1))
done
echo "[$MODE] two jobs at once in $bad of $N"
