# Sourced by the redteam12 scripts. A server: $RT12_URI if set (a FerretDB the caller runs), else a private
# one from scripts/test-server, stopped on exit. Helpers: raw (raw.py), $ML/$ML_BASE (HEAD, baseline),
# fp_start/proxy (tests/integration/failproxy.py in front of the server).
export RT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$RT_DIR/../../.." && pwd)
ML=${ML:-$REPO/build/cli/mongolock}
ML_BASE=${ML_BASE:-$REPO/build-baseline-3ce8898/build/cli/mongolock}
MONGO_PY=$REPO/tests/integration/mongo.py
FAILPROXY_PY=$REPO/tests/integration/failproxy.py
W=$(mktemp -d /tmp/rt12.XXXXXX)
_rt12_cleanup() {
  [[ -n ${FP_PID:-} ]] && kill "$FP_PID" 2>/dev/null
  [[ -n ${_RT12_SRV_PID:-} ]] && kill "$_RT12_SRV_PID" 2>/dev/null
  rm -rf "$W"
}
trap _rt12_cleanup EXIT
if [[ -z ${RT12_URI:-} ]]; then
  "$REPO/scripts/test-server" >"$W/uri" 2>"$W/server.err" &
  _RT12_SRV_PID=$!
  for _ in $(seq 300); do [[ -s $W/uri ]] && break; sleep 0.1; done
  RT12_URI=$(cat "$W/uri")
  [[ -n $RT12_URI ]] || { echo "no server: $(cat "$W/server.err")"; exit 2; }
fi
export MONGOLOCK_URI=$RT12_URI
SERVER_PORT=${RT12_URI##*:}; SERVER_PORT=${SERVER_PORT%%/*}
raw() { python3 "$RT_DIR/raw.py" "$1"; }
# fp_start: a failproxy of its own; sets FP_URI, PROXY_CTL, FP_PID.
fp_start() {
  PROXY_CTL=$W/fp; mkdir -p "$PROXY_CTL"; rm -f "$W/fp.port"
  python3 "$FAILPROXY_PY" serve "$W/fp.port" "$SERVER_PORT" "$PROXY_CTL" 2>"$W/fp.log" &
  FP_PID=$!
  for _ in $(seq 100); do [[ -s $W/fp.port ]] && break; sleep 0.1; done
  FP_URI="mongodb://127.0.0.1:$(cat "$W/fp.port")/"
}
proxy() {
  local fin fout reply=
  exec {fin}>"$PROXY_CTL/in" {fout}<"$PROXY_CTL/out"
  printf '%s\n' "$*" >&"$fin"
  read -r -t 10 reply <&"$fout" || true
  exec {fin}>&- {fout}<&-
  echo "  proxy $*: $reply" >&2
}
