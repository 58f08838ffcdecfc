# Sourced by the a_*.sh attacks: a private FerretDB (../srv.sh, state in $ADV_T), short timings, helpers.
# Run from anywhere: bash tests/adversarial/replace/a_both75b.sh (logs in $ADV_T/out).
RT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ADV_T=${ADV_T:-/tmp/adv-replace}
source "$RT_DIR/../srv.sh"
srv_running || srv_start
mkdir -p "$ADV_T/out"
cd "$ADV_T" || exit 2
BASE="--ttl 6s --renew-interval 2s"
TIMING="$BASE --kill-grace 1s"
host() { local h=$1; shift; unshare -u bash -c "hostname $h; exec \"\$@\"" _ "$@"; }
job() { echo python3 "$HOLDERS_PY" job "$@"; }
chk() { python3 "$HOLDERS_PY" check "$1" --gap-ms 200 --min-holders 1 | tail -2; }
ts() { date +%s.%N; }
