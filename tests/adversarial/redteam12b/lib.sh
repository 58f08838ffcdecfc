# Sourced by the redteam12b scripts: round one's lib.sh (private server, raw, fp_start, proxy) plus
# rw_start MODES (rwproxy.py in front of the server; sets RW_URI, RW_PID).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../redteam12/lib.sh"
RT12B_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RW_PIDS=()
rw_start() {
  rm -f "$W/rw.port"
  python3 "$RT12B_DIR/rwproxy.py" "$W/rw.port" "$SERVER_PORT" "$1" 2>>"$W/rw.log" &
  RW_PID=$!; RW_PIDS+=("$RW_PID")
  for _ in $(seq 100); do [[ -s $W/rw.port ]] && break; sleep 0.1; done
  RW_URI="mongodb://127.0.0.1:$(cat "$W/rw.port")/"
}
rw_stop() { kill "$RW_PID" 2>/dev/null; wait "$RW_PID" 2>/dev/null; }
_rt12b_cleanup() { for p in "${RW_PIDS[@]}"; do kill "$p" 2>/dev/null; done; _rt12_cleanup; }
trap _rt12b_cleanup EXIT
# fresh COLL: a new collection name for this case
fresh() { export MONGOLOCK_COLLECTION="rt12b_$1_$RANDOM$RANDOM"; }
ndocs() { python3 "$MONGO_PY" count; }
