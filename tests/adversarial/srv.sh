# source me: srv_start / srv_kill / srv_stop ; state in $ADV_T
ADV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$ADV_DIR/../.." && pwd)
FERRETDB_BIN=${FERRETDB_BIN:-$HOME/.cache/mongolock/bin/ferretdb-v1.24.2}
ADV_T=${ADV_T:-/tmp/adv-red}
mkdir -p "$ADV_T/db"
ML=${ML:-$REPO/build/cli/mongolock}
HOLDERS_PY=$REPO/tests/integration/holders.py
MONGO_PY=$REPO/tests/integration/mongo.py
srv_port_file=$ADV_T/port
if [[ ! -s $srv_port_file ]]; then
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' >"$srv_port_file"
fi
SERVER_PORT=$(cat "$srv_port_file")
export MONGOLOCK_URI=mongodb://127.0.0.1:$SERVER_PORT/
srv_start() {
  "$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$ADV_T/db/" \
    --listen-addr="127.0.0.1:$SERVER_PORT" --telemetry=disable --debug-addr=- \
    --state-dir="$ADV_T/db" --log-level=warn >>"$ADV_T/server.log" 2>&1 &
  SERVER_PID=$!; echo $SERVER_PID > $ADV_T/server.pid
  disown $SERVER_PID
  for i in $(seq 1 1500); do
    MONGOLOCK_URI=$MONGOLOCK_URI python3 $MONGO_PY now >/dev/null 2>&1 && return 0
    sleep 0.01
  done
  echo "server did not start"; return 1
}
srv_kill() { kill -KILL "$(cat $ADV_T/server.pid)"; }
srv_running() { kill -0 "$(cat $ADV_T/server.pid 2>/dev/null)" 2>/dev/null; }
now() { date +%s.%N; }
