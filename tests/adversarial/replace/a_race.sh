#!/bin/bash
# two replacing runs from the same host started in the same millisecond, against a replaceable holder; ROUNDS times
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for r in $(seq ${ROUNDS:-8}); do
N=race-$RANDOM; F=out/race.h; rm -f $F
$ML run $N $TIMING --replace -- $(job $F --seconds 30) >out/race-h.err 2>&1 & h=$!
sleep 1.2
# both started by one process at once
python3 - "$ML" "$N" "$F" <<'PY' >out/race-rs.txt 2>&1
import subprocess, sys, os
ml, n, f = sys.argv[1:4]
cmd = [ml, "run", n, "--ttl", "6s", "--renew-interval", "2s", "--kill-grace", "1s", "--replace", "--",
       "python3", os.environ["HOLDERS_PY"], "job", f, "--seconds", "2"]
ps = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
for p in ps:
    _, err = p.communicate(timeout=60)
    print(p.returncode, err.strip().replace("\n", " | ")[:200])
PY
wait $h; he=$?
echo "round $r: H exit $he; R: $(tr '\n' ';' < out/race-rs.txt); $(python3 $HOLDERS_PY check $F --gap-ms 200 | grep max_)"
done
