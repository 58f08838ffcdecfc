#!/usr/bin/env bash
# B1: does a GSSAPI URI load Cyrus SASL's plugins from every place a URI can come from (and only then)?
# "Available mechanisms: ..." of libmongoc's GSSAPI error lists what Cyrus loaded (CRAM-MD5, DIGEST-MD5 ...
# are plugins; without plugins the list is short or empty). Non-GSSAPI runs: the guardian's (the job's
# parent's) /proc/PID/maps must list no /sasl2/ library.
source "$(dirname "$0")/lib.sh"
HP=${RT12_URI#mongodb://}; HP=${HP%%/*}
G="mongodb://alice@$HP/?authSource=%24external&authMechanism"
mech() { grep -o "Available mechanisms: [^ ]*" "$W/err" | head -c 140 || echo "(no mechanism list) $(head -c 160 "$W/err")"; }
try() { # LABEL, then the command line as words
  local label=$1; shift
  timeout 30 "$@" acquire "b1$RANDOM" >/dev/null 2>"$W/err"; echo "$label: rc=$? $(mech)"
}
try "--uri GSSAPI" "$ML" --uri "$G=GSSAPI"
try "--uri gssapi (lower)" "$ML" --uri "$G=gssapi"
try "--uri GsSaPi" "$ML" --uri "$G=GsSaPi"
try "MONGOLOCK_URI" env MONGOLOCK_URI="$G=GSSAPI" "$ML"
printf '%s\n' "$G=GSSAPI" >"$W/urifile"; chmod 600 "$W/urifile"
try "--uri-file" "$ML" --uri-file "$W/urifile"
try "--uri-file on a pipe" sh -c "printf '%s\n' '$G=GSSAPI' | '$ML' --uri-file /dev/stdin \"\$@\"" sh
printf 'uri = "%s"\n' "$G=GSSAPI" >"$W/config"
try "config file uri" env -u MONGOLOCK_URI "$ML" --config "$W/config"
printf 'uri-file = "%s"\n' "$W/urifile" >"$W/config2"
try "config file uri-file" env -u MONGOLOCK_URI "$ML" --config "$W/config2"
try "twice: SCRAM-SHA-1 then GSSAPI" "$ML" --uri "$G=SCRAM-SHA-1&authMechanism=GSSAPI"
try "twice: GSSAPI then SCRAM-SHA-256" "$ML" --uri "$G=GSSAPI&authMechanism=SCRAM-SHA-256"
try "authmechanism=GSSAPI (key case)" "$ML" --uri "mongodb://alice@$HP/?authSource=%24external&AUTHMECHANISM=GSSAPI"
try "GSSAPI + authMechanismProperties" "$ML" --uri "$G=GSSAPI&authMechanismProperties=SERVICE_NAME:other,CANONICALIZE_HOST_NAME:true"
try "GSSAPI, user in %-encoding" "$ML" --uri "mongodb://al%40ice%3A@$HP/?authSource=%24external&authMechanism=GSSAPI"
echo "-- non-GSSAPI runs: /sasl2/ plugins mapped in the guardian (the job's parent) and in mongolock itself"
for u in "$RT12_URI" "mongodb://u:secretpw@$HP/?authMechanism=SCRAM-SHA-256" "mongodb://u:secretpw@$HP/?authMechanism=PLAIN" \
         "mongodb://u:secretpw@$HP/?authMechanism=SCRAM-SHA-1"; do
  timeout 30 "$ML" --uri "$u" run "b1m$RANDOM" -- sh -c 'grep -c /sasl2/ /proc/$PPID/maps; grep -c /sasl2/ /proc/$(ps -o ppid= -p $PPID | tr -d " ")/maps' >"$W/out" 2>"$W/err"
  echo "$(echo "$u" | sed 's/:[^:@]*@/:***@/'): rc=$? sasl2 maps guardian/mongolock: $(tr '\n' ' ' <"$W/out") $(grep -c secretpw "$W/err") password mentions; $(head -c 100 "$W/err")"
done
