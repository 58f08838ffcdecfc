#!/bin/bash
# multijob.sh SECONDS FILE... : one holders.py ticker per file, SIGTERM forwarded
export MONGOLOCK_TOKEN=$(printf %s "${MONGOLOCK_TOKEN:--}" | tr '\n' _)
s=$1; shift; pids=()
for f in "$@"; do python3 /work/main/tests/integration/holders.py job "$f" --seconds "$s" & pids+=($!); done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
for p in "${pids[@]}"; do wait $p; done; wait
