# Sourced by the redteam3 scripts: a private FerretDB (../srv.sh, state in $ADV_T), helpers.
ADV_T=${ADV_T:-/tmp/adv-rt3}
RT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$RT_DIR/../srv.sh"
srv_running || srv_start || exit 2
export ML MONGOLOCK_URI ADV_T
FAILPROXY_PY=$REPO/tests/integration/failproxy.py
CHECK="python3 $HOLDERS_PY check"
# A "container": new PID, UTS and mount namespaces with its own /proc, host name $CT_HOST (default vm);
# SCRIPT runs as PID 1 (sh -c). Usage: ct SCRIPT [ARGS...]
ct() { unshare --uts --pid --fork --mount-proc sh -c 'hostname "${CT_HOST:-vm}" && eval "$1"' _ "$@"; }
# doc NAME: NAME's lock document as key=value lines (mongo.py doc); field NAME KEY: one value, "" when absent.
doc() { python3 "$MONGO_PY" doc "$1" 2>/dev/null; }
field() { doc "$1" | sed -n "s/^$2=//p"; }
# The failure proxy in front of the server (as test_failover.sh): sets FP_URI, FP_URI_NORETRY, PROXY_CTL.
fp_start() {
  PROXY_CTL=$ADV_T/failproxy.$$; rm -rf "$PROXY_CTL"; mkdir -p "$PROXY_CTL"; rm -f "$ADV_T/fp.port.$$"
  python3 "$FAILPROXY_PY" serve "$ADV_T/fp.port.$$" "$SERVER_PORT" "$PROXY_CTL" --rs rs0 2>"$ADV_T/failproxy.log" &
  FP_PID=$!
  for i in $(seq 100); do [[ -s $ADV_T/fp.port.$$ ]] && break; sleep 0.1; done
  FP_URI="mongodb://127.0.0.1:$(cat "$ADV_T/fp.port.$$")/?replicaSet=rs0"
  FP_URI_NORETRY="$FP_URI&retryWrites=false"
}
fp_stop() { kill "$FP_PID" 2>/dev/null; wait "$FP_PID" 2>/dev/null; rm -rf "$PROXY_CTL"; }
proxy() {
  local fin fout reply=
  exec {fin}>"$PROXY_CTL/in" {fout}<"$PROXY_CTL/out"
  printf '%s\n' "$*" >&"$fin"
  read -r -t 10 reply <&"$fout" || true
  exec {fin}>&- {fout}<&-
  [[ $reply == ok* ]] || echo "proxy $*: ${reply:-no answer}" >&2
}
