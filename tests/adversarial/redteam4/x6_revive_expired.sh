#!/usr/bin/env bash
# x6: renewals delayed in transit (forwarded D ms late) while the run's release cannot get through (hangs):
# the run loses its lease (76, job stopped) and its lock document expires; then the delayed copies land.
# Their filter is expires_at > (their own send stamp), not > the server's now, so they match the expired
# document and make it live again for a run that is gone. Samples the document and the server's clock.
#   bash x6_revive_expired.sh N [D]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; D=${2:-4500}
for i in $(seq "$n"); do
  new_case x6; fp_start
  holder a "$FP_URI" 30 --ttl 6s
  wait_acq
  proxy fail findAndModify:update for 6000 delay "$D"
  proxy fail findAndModify:remove,delete for 30000 hang
  (for k in $(seq 700); do echo "now=$(doc now) $(doc doc "$NAME" 2>/dev/null | grep -E '^(expires_at|renewed_at|token)=' | tr '\n' ' ')"; sleep 0.02; done) >"$W/samples" &
  sp=$!
  rc_of a; ra=$RC; ta=$(now_ms)
  sleep 9; kill $sp 2>/dev/null; wait $sp 2>/dev/null
  python3 - "$W/samples" "$ra" "$ta" <<'PY'
import re, sys
rows = []
for l in open(sys.argv[1]):
    n = re.search(r"now=(\d+)", l); e = re.search(r"expires_at=(\d+)", l)
    if n and e: rows.append((int(n.group(1)), int(e.group(1))))
revived = []
for (n0, e0), (n1, e1) in zip(rows, rows[1:]):
    if e0 < n0 and e1 > n1: revived.append((n1, e0, e1))
print(f"x6: a={sys.argv[2]} exited at {sys.argv[3]}; expiries seen {sorted(set(e for _, e in rows))}; "
      f"revived (expired doc made live again) {len(revived)}x" +
      (f": at now={revived[0][0]} expires {revived[0][1]} -> {revived[0][2]} (+{revived[0][2]-revived[0][0]} ms live, "
       f"{revived[0][0]-int(sys.argv[3])} ms after mongolock exited)" if revived else ""))
PY
  echo "   dir=$W; a: $(grep -E 'lost|deadline' "$W/a.err" | head -1)"
  fp_stop
done
