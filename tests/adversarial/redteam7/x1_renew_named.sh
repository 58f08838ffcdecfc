#!/usr/bin/env bash
# x1 (target 1): a renewal above an "outstamping" renewal needs a filter that names the acquisition
# (locker.cpp outstamped(): _id or token). failproxy (--rs rs0) delays one renewal's findAndModify by DELAY ms.
#   bash x1_renew_named.sh CASE [N]
#   CASE: oldtoken   acquire --process H --ttl 20s (token T1); `renew --token T1` delayed; meanwhile H releases
#                    and acquires again with --ttl 1h (T2): the late renewal must match nothing (66/65) and the
#                    1h lease stay; host-b must not get the lock
#         oldtoken_now  the same without the delay: `renew --token T1` after the re-acquisition
#         expired    acquire --ttl 3s (T); `renew --token T --ttl 1h` delayed DELAY (default 5000) ms; meanwhile
#                    `renew --token T` (3s) outstamps it; the lock expires on the server before the delayed one
#                    lands: is the expired lock revived for 1h? (FerretDB: no server-time condition)
#         expired_taken  the same, but host-b acquires the expired lock before the delayed renewal lands: host-b's
#                    lock (token, expiry) must not change
source "$(dirname "$0")/lib.sh"
case_=${1:-oldtoken}; n=${2:-1}; DELAY=${DELAY:-4000}
field() { doc doc "$NAME" | awk -F= -v k="$1" '$1==k {print $2}'; }
hostb() { unshare --uts sh -c 'hostname host-b && exec "$@"' sh "$ML" --uri "$SERVER_URI" "$@"; }
for i in $(seq "$n"); do
  new_case "x1$case_"
  fp_start
  case $case_ in
  oldtoken|oldtoken_now)
    H=rt7-host:4242
    T1=$("$ML" --uri "$SERVER_URI" acquire "$NAME" --process "$H" --ttl 20s)
    [[ $case_ == oldtoken ]] && proxy fail findAndModify:update times 1 delay "$DELAY"
    if [[ $case_ == oldtoken ]]; then
      "$ML" -v --uri "$FP_URI" renew "$NAME" --token "$T1" >"$W/renew.out" 2>"$W/renew.err" & rpid=$!
      sleep 0.5
    fi
    "$ML" --uri "$SERVER_URI" release "$NAME" --process "$H"
    T2=$("$ML" --uri "$SERVER_URI" acquire "$NAME" --process "$H" --ttl 1h)
    if [[ $case_ == oldtoken ]]; then wait $rpid; rr=$?
    else "$ML" -v --uri "$FP_URI" renew "$NAME" --token "$T1" >"$W/renew.out" 2>"$W/renew.err"; rr=$?; fi
    left=$(( $(field expires_at) - $(doc now) ))
    hostb acquire "$NAME" --ttl 30s >"$W/b.out" 2>"$W/b.err"; rb=$?
    echo "x1 $case_ delay=$DELAY: renew --token T1 rc=$rr; T2's lock ${T2:0:8} (doc $(field token | cut -c1-8)) has $left ms left; host-b acquire rc=$rb dir=$W"
    grep -E "renewing above|error" "$W/renew.err" | head -2 | cut -c1-250 | sed 's/^/   | /' ;;
  expired|expired_taken)
    DELAY=${DELAY_E:-5000}
    T=$("$ML" --uri "$SERVER_URI" acquire "$NAME" --ttl 3s)
    proxy fail findAndModify:update times 1 delay "$DELAY"
    "$ML" -v --uri "$FP_URI" renew "$NAME" --token "$T" --ttl 1h >"$W/renew.out" 2>"$W/renew.err" & rpid=$!
    sleep 0.5
    "$ML" --uri "$SERVER_URI" renew "$NAME" --token "$T"; r2=$?
    e2=$(field expires_at)
    tb=
    if [[ $case_ == expired_taken ]]; then
      for k in $(seq 80); do tb=$(hostb acquire "$NAME" --ttl 30s 2>"$W/b.err") && break; tb=; sleep 0.1; done
      echo "   host-b: ${tb:+acquired}${tb:-never acquired in 8 s: $(tail -1 "$W/b.err" | cut -c1-200)}"
    fi
    eb=$(field expires_at)
    wait $rpid; rr=$?
    now=$(doc now); e3=$(field expires_at); t3=$(field token)
    echo "x1 $case_ delay=$DELAY: outstamping renew rc=$r2 (expiry $(( e2 - now )) ms from now at the end); late renew --ttl 1h rc=$rr;" \
      "the doc's token ${t3:0:8} (ours ${T:0:8}${tb:+, host-b ${tb:0:8}}) expires in $(( (e3 - now) / 1000 )) s${tb:+ (host-b expiry unchanged: $([[ $eb == "$e3" ]] && echo yes || echo NO))} dir=$W"
    grep -E "renewing above|error|renewed until" "$W/renew.err" | head -2 | cut -c1-250 | sed 's/^/   | /' ;;
  esac
  fp_stop
done
