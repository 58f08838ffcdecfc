# shellcheck shell=bash
# failproxy.py (replica-set errors, lost replies, blackouts) in front of the suite's shared test server, for
# suites that source common.sh and inject a fault into some clients' commands only. The fault suites that
# start a server of their own per case (test_failover.sh) have their own helpers.

FAILPROXY_PY=$ITEST_DIR/failproxy.py

# failproxy_start: a failproxy.py in front of $MONGOLOCK_URI's server; sets FP_URI. `proxy COMMAND`
# (common.sh) controls it.
failproxy_start() {
  local upstream=${MONGOLOCK_URI#mongodb://}
  upstream=${upstream%%/*}
  PROXY_CTL=$T/failproxy
  PROXY_LOG=$T/failproxy.log
  mkdir "$PROXY_CTL"
  python3 "$FAILPROXY_PY" serve "$T/failproxy.port" "${upstream##*:}" "$PROXY_CTL" 2>"$T/failproxy.log" &
  track $!
  wait_until 10 test -s "$T/failproxy.port"
  FP_URI="mongodb://127.0.0.1:$(cat "$T/failproxy.port")/"
}

