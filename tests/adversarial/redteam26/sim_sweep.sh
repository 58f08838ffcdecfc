#!/usr/bin/env bash
# The protocol simulator (tests/sim, build/tests/sim/mongolock-sim) beyond CI's seeds 1..10000: 100,000 schedules
# per semantics and mode from seed 100000. Prints each run's summary or its violation and replay command.
S=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/build/tests/sim/mongolock-sim
for sem in mongodb ferretdb; do for mode in "" --edge --multi; do
  echo "== $sem $mode"; "$S" --semantics $sem $mode --seed 100000 --schedules ${1:-100000} 2>&1 | grep -E "^mongolock-sim|^replay" | cut -c1-220
done; done
