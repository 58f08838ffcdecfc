#!/usr/bin/env bash
# x1: a renewal DELAYED (forwarded late, not dropped) past the call bound, so that its copy lands after the
# retry on a new connection was applied. --ttl 6s (renew every 2 s, deadline 4 s, reserve 250 ms: the call
# is abandoned at ~1.75 s). Samples the lock document every 20 ms: expires_at must never move back, the
# token never change; a contender on host-b must never overlap.
#   bash x1_delay_past_retry.sh N [DELAY_MS...]   (default delays 1800 2200 2600 3500)
source "$(dirname "$0")/lib.sh"
n=${1:-1}; shift || true
delays=("${@:-1800 2200 2600 3500}"); read -ra delays <<<"${delays[*]}"
for i in $(seq "$n"); do for d in "${delays[@]}"; do
  new_case x1; fp_start
  holder a "$FP_URI" 12 --ttl 6s
  wait_acq; wait_ren a 1
  contender b 1 --ttl 6s
  proxy fail findAndModify:update times 1 delay "$d"
  (for k in $(seq 300); do doc doc "$NAME" 2>/dev/null | tr '\n' ' '; echo; sleep 0.02; done) >"$W/samples" &
  sp=$!
  rc_of a; ra=$RC; rc_of b; rb=$RC; kill $sp 2>/dev/null; wait $sp 2>/dev/null
  back=$(python3 - "$W/samples" <<'PY'
import sys, re
prev = None; tok = None; back = 0
for line in open(sys.argv[1]):
    m = re.search(r"expires_at=(\d+)", line); t = re.search(r"token=(\S+)", line)
    if not m: prev = None; continue
    e = int(m.group(1))
    if t and tok and t.group(1) != tok: prev = None  # another holder
    if t: tok = t.group(1)
    if prev is not None and e < prev: back += 1; print("BACK", prev, "->", e, file=sys.stderr)
    prev = e
print(back)
PY
)
  echo "x1 delay=${d}ms: a=$ra b=$rb renewals=$(renewals a) retrying=$(grep -c 'retrying' "$W/a.err") expires_back=$back $(check) dir=$W"
  fp_stop
done; done
