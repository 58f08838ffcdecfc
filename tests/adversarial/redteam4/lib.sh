# Sourced by the redteam4 scripts: a private FerretDB (../srv.sh, state in $ADV_T), failproxy.py in front
# of it (replica set rs0), helpers. Not run by scripts/test.
ADV_T=${ADV_T:-/tmp/adv-rt4}
RT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$RT_DIR/../srv.sh"
srv_running || srv_start || exit 2
FAILPROXY_PY=$REPO/tests/integration/failproxy.py
SERVER_URI=mongodb://127.0.0.1:$SERVER_PORT/
# fp_start: a failproxy of its own in $W (the case's directory); sets FP_URI, PROXY_CTL, FP_PID.
fp_start() {
  PROXY_CTL=$W/fp; rm -rf "$PROXY_CTL"; mkdir -p "$PROXY_CTL"; rm -f "$W/fp.port"
  python3 "$FAILPROXY_PY" serve "$W/fp.port" "$SERVER_PORT" "$PROXY_CTL" --rs rs0 2>"$W/fp.log" &
  FP_PID=$!
  for i in $(seq 100); do [[ -s $W/fp.port ]] && break; sleep 0.1; done
  FP_URI="mongodb://127.0.0.1:$(cat "$W/fp.port")/?replicaSet=rs0"
}
fp_stop() { kill "$FP_PID" 2>/dev/null; wait "$FP_PID" 2>/dev/null; }
proxy() {
  local fin fout reply=
  exec {fin}>"$PROXY_CTL/in" {fout}<"$PROXY_CTL/out"
  printf '%s\n' "$*" >&"$fin"
  read -r -t 10 reply <&"$fout" || true
  exec {fin}>&- {fout}<&-
  echo "proxy $*: $reply" >>"$W/log"
}
# new_case LABEL: a fresh directory $W and a fresh lock name $NAME.
new_case() { W=$ADV_T/$1.$$.$RANDOM; mkdir -p "$W"; NAME=rt4-$1-$RANDOM; HOLDERS=$W/holders; : >"$HOLDERS"; }
# holder LABEL URI SECONDS [RUN OPTIONS]: mongolock -v run NAME OPTIONS -- holders.py job, in background.
holder() {
  local label=$1 uri=$2 s=$3; shift 3
  setsid "$ML" -v --uri "$uri" run "$NAME" "$@" -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$s" \
    >"$W/$label.out" 2>"$W/$label.err" &
  echo $! >"$W/$label.pid"
}
# contender LABEL SECONDS [RUN OPTIONS]: from another host (own UTS ns), straight to the server.
contender() {
  local label=$1 s=$2; shift 2
  unshare --uts sh -c 'hostname "$0" && exec "$@"' host-b "$ML" -v --grace 500ms --uri "$SERVER_URI" run "$NAME" \
    --wait 60s "$@" -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds "$s" >"$W/$label.out" 2>"$W/$label.err" &
  echo $! >"$W/$label.pid"
}
wait_acq() { for i in $(seq 200); do grep -q "^start" "$HOLDERS" 2>/dev/null && return 0; sleep 0.05; done; return 1; }
renewals() { grep -c "renewed until" "$W/$1.err" || true; }
wait_ren() { for i in $(seq 400); do (($(renewals "$1") >= $2)) && return 0; sleep 0.05; done; return 1; }
rc_of() { wait "$(cat "$W/$1.pid")"; RC=$?; }
doc() { MONGOLOCK_URI=$SERVER_URI python3 "$MONGO_PY" "$@"; }
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
check() { python3 "$HOLDERS_PY" check "$HOLDERS" --min-holders 1 2>&1 | tail -1; }
