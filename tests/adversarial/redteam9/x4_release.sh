#!/usr/bin/env bash
# x4 (target 4): `release NAME --process H` finds the lock by holder, then deletes it by _id (Locker::release).
# H = `acquire NAME --process rt9-host:4242 --ttl 3s` (straight to the server); the release goes through
# faultproxy.py, whose hold-remove keeps its delete (and everything after it on that proxy) back; meanwhile:
#   bash x4_release.sh CASE [N]
#   CASE: takeover  H's lock expires; host-b (run --wait 60s, 6 s job) takes the name over (a new document)
#         sameid    the found document is changed in place, same _id, to another holder (process and token of
#                   host-b: what a client that rewrites a document whole by _id would leave)
#         minhold   H acquired with --min-hold 20s --ttl 30s: the release marks it released instead of deleting
#                   (not held by hold-remove: control that the release path works through the proxy)
# then the held delete is let through; then host-c (run --wait 60s, 2 s job) takes the name. A removed lock
# that the release did not hold shows as overlap (b's job and c's) or as b's document gone.
source "$(dirname "$0")/lib.sh"
case_=${1:-takeover}; n=${2:-1}; P=rt9-host:4242
contender_c() {
  unshare --uts sh -c 'hostname "$0" && exec "$@"' host-c "$ML" -v --grace 500ms --uri "$SERVER_URI" run "$NAME" \
    --wait 60s -- python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 2 >"$W/c.out" 2>"$W/c.err" &
  echo $! >"$W/c.pid"
}
for i in $(seq "$n"); do
  new_case "x4$case_"
  tp_start
  hold=(--ttl 3s); [[ $case_ == minhold ]] && hold=(--ttl 30s --min-hold 20s)
  "$ML" --uri "$SERVER_URI" acquire "$NAME" --process "$P" "${hold[@]}" >"$W/tok"
  id0=$(field "$NAME" _id)
  tp hold-remove
  "$ML" -v --uri "$TP_URI" release "$NAME" --process "$P" >"$W/rel.out" 2>"$W/rel.err" &
  rel=$!
  for k in $(seq 200); do grep -q "hold-remove: a delete held" "$W/tp.log" && break; sleep 0.05; done
  held=$(grep -c "hold-remove: a delete held" "$W/tp.log")
  case $case_ in
  takeover)
    contender b 6
    wait_acq ;;
  sameid)
    doc set "$NAME" process host-b:999; doc set "$NAME" token rt9-other-token ;;
  esac
  echo "before pass: _id $id0 -> $(field "$NAME" _id), process $(field "$NAME" process)" >>"$W/log"
  tp pass
  wait "$rel"; rr=$?
  after="process=$(field "$NAME" process) _id=$(field "$NAME" _id)"
  [[ $case_ == takeover ]] && contender_c
  if [[ $case_ == takeover ]]; then rc_of b; rb=$RC; rc_of c; rc=$RC; else rb=-; rc=-; fi
  tp_stop
  echo "x4 $case_: delete held=$held, release rc=$rr ($(grep 'mongolock: error' "$W/rel.err" | head -1 | cut -c1-200)); lock after: $after; b=$rb c=$rc $([[ $case_ == takeover ]] && overlap) dir=$W"
done
