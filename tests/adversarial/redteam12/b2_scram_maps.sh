#!/usr/bin/env bash
# B2: a private FerretDB with SCRAM (--test-enable-new-auth, user alice): a SCRAM-SHA-256 / SCRAM-SHA-1 /
# default-mechanism run maps no /sasl2/ plugin (mongolock = the guardian's parent, the guardian = the job's
# parent), with a hostile SASL_PATH set too; -v never prints the password; GSSAPI with that SASL_PATH.
# Then the guardian's orphan release after mongolock is SIGKILLed (a GSSAPI-free URI): plugins mapped there?
RT_DIR=$(cd "$(dirname "$0")" && pwd); REPO=$(cd "$RT_DIR/../../.." && pwd)
ML=${ML:-$REPO/build/cli/mongolock}
FERRETDB_BIN=${FERRETDB_BIN:-$HOME/.cache/mongolock/bin/ferretdb-v1.24.2}
W=$(mktemp -d /tmp/rt12b2.XXXXXX)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PW='s3cr3t-PW_rt12'
"$FERRETDB_BIN" --handler=sqlite --sqlite-url="file:$W/" --state-dir="$W" --telemetry=disable --log-level=warn \
  --listen-addr="127.0.0.1:$PORT" --debug-addr=- --test-enable-new-auth --setup-database=mongolock \
  --setup-username=alice "--setup-password=$PW" >"$W/server.log" 2>&1 &
SRV=$!; trap 'kill $SRV 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2).close()" 2>/dev/null && break; sleep 0.1; done
sleep 1
mkdir -p "$W/bogus"; echo 'not an ELF' >"$W/bogus/libbogus.so"; cp /bin/true "$W/bogus/libtrue.so"
LONG=$(head -c 200000 /dev/zero | tr '\0' 'a')
COLONS=$(head -c 50000 /dev/zero | tr '\0' ':')
for sp in "" "$W/bogus" "$LONG" "$COLONS" "$W/bogus:$COLONS:/usr/lib/x86_64-linux-gnu/sasl2"; do
  for mech in SCRAM-SHA-256 SCRAM-SHA-1 ""; do
    uri="mongodb://alice:$PW@127.0.0.1:$PORT/?authSource=mongolock${mech:+&authMechanism=$mech}"
    printf '%s\n' "$uri" >"$W/uri"; chmod 600 "$W/uri"
    SASL_PATH=$sp timeout 30 "$ML" -v --uri-file "$W/uri" run "b2$RANDOM" -- sh -c \
      'g=$PPID; m=$(ps -o ppid= -p $g | tr -d " "); echo "$(grep -c /sasl2/ /proc/$g/maps) $(grep -c /sasl2/ /proc/$m/maps)"' \
      >"$W/out" 2>"$W/err"; rc=$?
    printf 'SASL_PATH=%-12s mech=%-13s rc=%s sasl2 maps guardian/mongolock: %s  password in -v log: %s\n' \
      "$(printf %s "$sp" | head -c 12)" "${mech:-default}" "$rc" "$(cat "$W/out")" "$(grep -c -- "$PW" "$W/err")"
    ((rc)) && head -c 300 "$W/err"
  done
  uri="mongodb://alice@127.0.0.1:$PORT/?authSource=%24external&authMechanism=GSSAPI"
  SASL_PATH=$sp timeout 30 "$ML" -v --uri "$uri" acquire g >/dev/null 2>"$W/err"; rc=$?
  echo "  GSSAPI: rc=$rc $(grep -o 'plugins loaded from .\{0,30\}' "$W/err" | head -1) / $(grep -o 'Available mechanisms: .\{0,60\}' "$W/err" | head -1) $(grep -o 'Segmentation\|core dumped' "$W/err")"
done
echo "-- orphan release: mongolock SIGKILLed while its job runs; the guardian's release executes mongolock again"
uri="mongodb://alice:$PW@127.0.0.1:$PORT/?authSource=mongolock&authMechanism=SCRAM-SHA-256"; printf '%s\n' "$uri" >"$W/uri"
"$ML" -v --uri-file "$W/uri" run orphan -- sh -c 'echo $PPID >'"$W/g"'; sleep 30' 2>"$W/err" & MP=$!
for _ in $(seq 50); do [[ -s $W/g ]] && break; sleep 0.1; done
G=$(cat "$W/g")
kill -KILL $MP; wait $MP 2>/dev/null
# the release child: watch the guardian's children while they live
for _ in $(seq 100); do
  for c in $(pgrep -P "$G" 2>/dev/null); do grep -q mongolock /proc/$c/cmdline 2>/dev/null && echo "release child $c: sasl2 maps $(grep -c /sasl2/ /proc/$c/maps 2>/dev/null)"; done
  kill -0 "$G" 2>/dev/null || break; sleep 0.05
done | sort -u | head -3
sleep 1
"$ML" --uri-file "$W/uri" acquire orphan --process other:1 >/dev/null 2>&1; echo "acquire after the orphan release: rc=$? (0: released)"
