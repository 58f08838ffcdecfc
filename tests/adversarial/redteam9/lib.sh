# Sourced by the redteam9 scripts: redteam8's lib.sh (redteam7/6/5/4's: a private FerretDB v1.24.2 SQLite in
# $ADV_T, failproxy helpers fp_start/proxy/holder/contender/doc, faultproxy helpers tp_start/tp, overlap) with
# its own state directory. Not run by scripts/test. Older binary for controls: CTL=/tmp/rt8-ctl/build/cli/mongolock
# (main 2ca1030, before run_ttl_ms and keep_until; `git archive 2ca1030` built by red team 8).
ADV_T=${ADV_T:-/tmp/adv-rt9}
source "$(dirname "${BASH_SOURCE[0]}")/../redteam8/lib.sh"
CTL=${CTL:-/tmp/rt8-ctl/build/cli/mongolock}
# field NAME KEY: one field of NAME's lock document (mongo.py doc prints key=value lines).
field() { doc doc "$1" | awk -F= -v k="$2" '$1==k {sub(/^[^=]*=/, ""); print; exit}'; }
