#!/usr/bin/env bash
# The simulator's BSON evaluator (tests/sim/bson_eval.cpp) agrees with the test server on MongoStore's own
# filters and updates (lib/mongolock/store/commands.hpp) and on every operator it implements, on the same
# documents (tests/sim/bson_check.cpp): the simulator's store runs those documents, so it must not be a
# second, wrong copy of the server's query semantics.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CHECK=${MONGOLOCK_BUILD_DIR:-$REPO_ROOT/build}/tests/sim/mongolock-bson-check

evaluator_agrees_with_server() {
  [[ -x $CHECK ]] || fail "$CHECK is missing (build the target mongolock-bson-check)"
  "$CHECK" "$MONGOLOCK_TEST_URI" "${MONGOLOCK_DB:-mongolock}" "$MONGOLOCK_COLLECTION" >"$OUT" 2>"$ERR" ||
    fail_with "the evaluator and the server differ" stdout "$OUT" stderr "$ERR"
  grep -Eq '^mongolock-bson-check: [1-9][0-9]+ filters and [1-9][0-9]* updates compared, 0 differ$' "$OUT" ||
    fail_with "no comparison was made" stdout "$OUT"
}

run_case "the simulator's evaluator matches and updates as the server does (MongoStore's filters, every operator)" \
  evaluator_agrees_with_server
finish
