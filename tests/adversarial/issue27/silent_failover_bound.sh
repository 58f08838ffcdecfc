#!/usr/bin/env bash
# Measures the longest silent failover a run survives (issue 27; man LIMITS, "Failover"): failproxy.py
# presents the test server as rs0, a run holds a lock with TTL, and when its first renewal is sent the
# primary goes silent (no reset) for BLACKOUT_MS, new connections answered after it. Prints the run's
# exit status (0: survived, 76: the lease was lost, the job stopped in time). Not in CI.
#   MONGOLOCK_TEST_URI=... MONGOLOCK_BIN=build/cli/mongolock TTL=30 BLACKOUT_MS=9800 \
#     bash tests/adversarial/issue27/silent_failover_bound.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=$(mktemp "$here/../../integration/scratch_sfo.XXXXXX.sh")
trap 'rm -f "$suite"' EXIT
cat >"$suite" <<'SUITE'
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$ITEST_DIR/faults.sh"
FAILPROXY_PY=$ITEST_DIR/failproxy.py
measure() {
  local name a job=$((TTL * 2)) rc=0
  name=$(lock_name)
  server_start
  PROXY_CTL=$T/failproxy
  mkdir "$PROXY_CTL"
  python3 "$FAILPROXY_PY" serve "$T/failproxy.port" "$SERVER_PORT" "$PROXY_CTL" --rs rs0 2>"$T/failproxy.log" &
  track $!
  wait_until 10 test -s "$T/failproxy.port"
  FP_URI="mongodb://127.0.0.1:$(cat "$T/failproxy.port")/?replicaSet=rs0"
  start_holder a "$FP_URI" "$name" "$job" --ttl "${TTL}s"
  a=$HOLDER_PID
  wait_acquired a
  proxy blackout "$BLACKOUT_MS" findAndModify:update
  expect_exit_code 0 "$a" a $((job + 30)) || rc=1
  result "ttl ${TTL}s blackout ${BLACKOUT_MS}ms: $(grep -c 'renewed until' "$T/a.err") renewals," \
    "$(grep -q "lease on '$name' lost" "$T/a.err" && echo 'lease lost' || echo 'lease kept')"
  return $rc
}
run_case "silent failover of ${BLACKOUT_MS}ms at the first renewal, ttl ${TTL}s: survived" measure
finish
SUITE
bash "$suite"
