#!/usr/bin/env bash
# x8: the holder's CLOCK_REALTIME offset from the server's (faketime on the client only, monotonic not faked:
# with it faked, libfaketime's shifted CLOCK_MONOTONIC vs the kernel's futex timeouts stalls the heartbeat, an
# artifact; FerretDB uses the host
# clock), OFFSET e.g. +30s / -30s / +1h, with one renewal never answered (--ttl 9s) and a contender on host-b
# on the true clock: never an overlap, exit 0 (the lease is counted on the server's clock, from hello).
#   bash x8_client_clock_offset.sh OFFSET [N]
source "$(dirname "$0")/lib.sh"
off=$1; n=${2:-1}
for i in $(seq "$n"); do
  new_case x8; fp_start
  FAKETIME_DONT_FAKE_MONOTONIC=1 setsid faketime -f "$off" "$ML" -v --uri "$FP_URI" run "$NAME" --ttl 9s -- env -u LD_PRELOAD -u FAKETIME -u FAKETIME_DONT_FAKE_MONOTONIC python3 "$HOLDERS_PY" job "$HOLDERS" --seconds 10 \
    >"$W/a.out" 2>"$W/a.err" &
  echo $! >"$W/a.pid"
  wait_acq; wait_ren a 1
  contender b 1 --ttl 9s
  proxy fail findAndModify:update times 1 hang
  rc_of a; ra=$RC; rc_of b; rb=$RC
  echo "x8 offset=$off: a=$ra b=$rb renewals=$(renewals a) $(check) dir=$W"
  grep -E "lost|clock|skew" "$W/a.err" | grep -v "server clock" | head -2 | cut -c1-200 | sed 's/^/   | /'
  fp_stop
done
