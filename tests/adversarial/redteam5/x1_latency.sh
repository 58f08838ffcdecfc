#!/usr/bin/env bash
# x1: every message delayed D ms in each direction (faultproxy delay; round trip 2*D), optional jitter
# (JITTER=J: the delay redrawn uniformly in [D-J, D+J] every 300 ms), run --ttl TTL with a JOB s job, a
# contender on host-b straight to the server. Prints the exit status, how long mongolock outlived its job
# (hang check: the earlier bug was 40 s+), the longest silence of its stderr, and the overlap.
#   D=1000 TTL=15s JOB=8 [JITTER=0] [URI_OPTS=socketCheckIntervalMS=60000] bash x1_latency.sh [N]
source "$(dirname "$0")/lib.sh"
n=${1:-1}; D=${D:-1000}; TTL=${TTL:-15s}; JOB=${JOB:-8}; JITTER=${JITTER:-0}
for i in $(seq "$n"); do
  new_case "x1d$D"; tp_start
  tp delay "$D"
  [[ -n ${URI_OPTS:-} ]] && TP_URI+="?$URI_OPTS"
  if ((JITTER > 0)); then
    ( while :; do tp delay $((D - JITTER + RANDOM % (2 * JITTER + 1))); sleep 0.3; done ) & jpid=$!
  fi
  t0=$(now_ms)
  holder a "$TP_URI" "$JOB" --ttl "$TTL"
  wait_acq; contender b 1 --ttl "$TTL"
  rc_of a; ra=$RC; t1=$(now_ms)
  [[ -n ${jpid:-} ]] && { kill "$jpid"; wait "$jpid" 2>/dev/null; jpid=; }
  rc_of b; rb=$RC
  end_ns=$(awk '$2!="host-b" {v=$5} END {print v}' "$HOLDERS")
  after=$(( t1 - end_ns / 1000000 ))
  echo "x1 D=$D J=$JITTER ${URI_OPTS:-} ttl=$TTL job=${JOB}s: a=$ra (ran $((t1 - t0))ms, exited ${after}ms after its job's last line) b=$rb renewals=$(renewals a) retrying=$(grep -c retrying "$W/a.err") $(check) dir=$W"
  grep -E "lost|deadline|unknown|abandon|error|not released|warning" "$W/a.err" | head -4 | sed 's/^/   | /'
  tp_stop
done
