# Sourced by the redteam6 scripts: redteam5's lib.sh (redteam4's: a private FerretDB in $ADV_T, failproxy
# helpers fp_start/proxy/holder/contender/check/doc; faultproxy helpers tp_start/tp) with its own state
# directory. Not run by scripts/test.
ADV_T=${ADV_T:-/tmp/adv-rt6}
source "$(dirname "${BASH_SOURCE[0]}")/../redteam5/lib.sh"
# pass_or_break LABEL RC_EXPECTED...: prints the overlap check of $HOLDERS as one line.
overlap() { python3 "$HOLDERS_PY" check "$HOLDERS" --min-holders "${1:-2}" 2>&1 | tail -1; }
# contender_here LABEL SECONDS [RUN OPTIONS]: a contender on this host (same UTS), straight to the server.
contender_here() {
  local label=$1 s=$2; shift 2
  setsid "$ML" -v --uri "$SERVER_URI" run "$NAME" --wait 60s "$@" -- python3 "$HOLDERS_PY" job "$HOLDERS" \
    --seconds "$s" >"$W/$label.out" 2>"$W/$label.err" &
  echo $! >"$W/$label.pid"
}
