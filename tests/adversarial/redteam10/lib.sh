# Sourced by the redteam10 scripts: redteam9's lib.sh (redteam8/7/6/5/4's: a private FerretDB v1.24.2 SQLite in
# $ADV_T, failproxy helpers fp_start/proxy/holder/contender/doc, faultproxy helpers tp_start/tp, overlap) with
# its own state directory, plus lyingproxy.py (failproxy + `error-after CODE`) and noclone3 (a seccomp filter
# under which clone3 fails). Not run by scripts/test.
ADV_T=${ADV_T:-/tmp/adv-rt10}
source "$(dirname "${BASH_SOURCE[0]}")/../redteam9/lib.sh"
RT10=$REPO/tests/adversarial/redteam10
LYING_PY=$RT10/lyingproxy.py
# noclone3 binary, built once into $ADV_T.
NOCLONE3=$ADV_T/noclone3
[[ -x $NOCLONE3 && $NOCLONE3 -nt $RT10/noclone3.c ]] || gcc -O1 -o "$NOCLONE3" "$RT10/noclone3.c" || exit 2
# lp_start: a lying proxy (failproxy --rs rs0 + error-after) in $W; sets FP_URI, PROXY_CTL, FP_PID (proxy works).
lp_start() {
  PROXY_CTL=$W/fp; rm -rf "$PROXY_CTL"; mkdir -p "$PROXY_CTL"; rm -f "$W/fp.port"
  python3 "$LYING_PY" serve "$W/fp.port" "$SERVER_PORT" "$PROXY_CTL" --rs rs0 2>"$W/fp.log" &
  FP_PID=$!
  for i in $(seq 100); do [[ -s $W/fp.port ]] && break; sleep 0.1; done
  FP_URI="mongodb://127.0.0.1:$(cat "$W/fp.port")/?replicaSet=rs0"
}
# lockdoc NAME: the lock document of NAME now (key=value lines), or "none".
lockdoc() { local d; d=$(doc doc "$1" 2>&1); [[ -n $d ]] && echo "$d" || echo none; }
