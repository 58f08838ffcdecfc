#!/usr/bin/env bash
# x2: man LIMITS' measured silent-failover bounds, k of n: tests/adversarial/issue27/silent_failover_bound.sh
# (failproxy blackout at the first renewal) against redteam5's private FerretDB.
#   TTL=6 BLACKOUT_MS=1900 bash x2_limits.sh [N]     (TTL in seconds)
source "$(dirname "$0")/lib.sh"
n=${1:-1}
for i in $(seq "$n"); do
  out=$(MONGOLOCK_TEST_URI=$SERVER_URI MONGOLOCK_BIN=$ML TTL=${TTL:-6} BLACKOUT_MS=${BLACKOUT_MS:-1900} \
    bash "$REPO/tests/adversarial/issue27/silent_failover_bound.sh" 2>&1)
  echo "x2 ttl=${TTL:-6}s blackout=${BLACKOUT_MS:-1900}ms: $(grep -E 'ttl .*blackout|PASS|FAIL|ok |not ok' <<<"$out" | tr '\n' ' ' | cut -c1-300)"
done
