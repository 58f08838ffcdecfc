# Sourced by the redteam8 scripts: redteam7's lib.sh (redteam6/5/4's: a private FerretDB v1.24.2 SQLite in
# $ADV_T, failproxy helpers fp_start/proxy/holder/contender/doc, faultproxy helpers tp_start/tp, overlap)
# with its own state directory. Not run by scripts/test.
ADV_T=${ADV_T:-/tmp/adv-rt8}
source "$(dirname "${BASH_SOURCE[0]}")/../redteam7/lib.sh"
