# Sourced by the redteam6 scripts: redteam5's lib.sh (redteam4's: a private FerretDB in $ADV_T, failproxy
# helpers fp_start/proxy/holder/contender/check/doc; faultproxy helpers tp_start/tp) with its own state
# directory. Not run by scripts/test.
ADV_T=${ADV_T:-/tmp/adv-rt6}
source "$(dirname "${BASH_SOURCE[0]}")/../redteam5/lib.sh"
# overlap [MIN_HOLDERS]: holders.py check of $HOLDERS, its last line (max_overlap_ms=..., or FAIL: ...).
overlap() { python3 "$HOLDERS_PY" check "$HOLDERS" --min-holders "${1:-2}" 2>&1 | tail -1; }
