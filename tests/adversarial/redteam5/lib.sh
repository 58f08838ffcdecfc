# Sourced by the redteam5 scripts: redteam4's lib.sh (a private FerretDB in $ADV_T, failproxy.py helpers:
# fp_start/proxy/holder/contender/check/doc) plus faultproxy.py (bidirectional per-message delay, refuse,
# hold). Not run by scripts/test.
ADV_T=${ADV_T:-/tmp/adv-rt5}
source "$(dirname "${BASH_SOURCE[0]}")/../redteam4/lib.sh"
FAULTPROXY_PY=$REPO/tests/integration/faultproxy.py
# tp_start: a faultproxy in $W; sets TP_URI, TP_CTL, TP_PID.
tp_start() {
  TP_CTL=$W/tp; rm -rf "$TP_CTL"; mkdir -p "$TP_CTL"; rm -f "$W/tp.port"
  python3 "$FAULTPROXY_PY" serve "$W/tp.port" "$SERVER_PORT" "$TP_CTL" 2>"$W/tp.log" &
  TP_PID=$!
  for i in $(seq 100); do [[ -s $W/tp.port ]] && break; sleep 0.1; done
  TP_URI="mongodb://127.0.0.1:$(cat "$W/tp.port")/"
}
tp_stop() { kill "$TP_PID" 2>/dev/null; wait "$TP_PID" 2>/dev/null; }
tp() { python3 "$FAULTPROXY_PY" ctl "$TP_CTL" "$@" >>"$W/log" 2>&1; }
# job_end_ms: wall ms at which the holders.py job of $HOLDERS ended (its "end" line), or empty.
last_field() { awk -v k="$1" '$1==k {v=$0} END {print v}' "$HOLDERS"; }
