#!/usr/bin/env bash
# B3: a SASL_PATH that makes Cyrus's sasl_client_init() fail (a path or component of PATH_MAX = 4096 bytes or
# more): load_deferred_sasl_plugins() has already called sasl_client_done(), ignores the failed init, and
# libmongoc's GSSAPI authentication then crashes in _mongoc_cyrus_set_mechanism (SIGSEGV, 139). Baseline:
# libmongoc's own init asserts (SIGABRT, 134) for every URI; HEAD: non-GSSAPI URIs unaffected (0).
source "$(dirname "$0")/lib.sh"
HP=${RT12_URI#mongodb://}; HP=${HP%%/*}
G="mongodb://alice@$HP/?authSource=%24external&authMechanism=GSSAPI"
for n in 4095 4096 5000; do
  for kind in colons letters valid-dir-first; do
    case $kind in
    colons) sp=$(head -c "$n" /dev/zero | tr '\0' ':') ;;
    letters) sp=/$(head -c "$n" /dev/zero | tr '\0' 'a') ;;
    valid-dir-first) sp=/usr/lib/x86_64-linux-gnu/sasl2:$(head -c "$n" /dev/zero | tr '\0' 'b') ;;
    esac
    SASL_PATH=$sp "$ML" -v --uri "$G" acquire g >/dev/null 2>"$W/err"; h=$?
    SASL_PATH=$sp "$ML" --uri "$RT12_URI" acquire "p$RANDOM" >/dev/null 2>&1; hp=$?
    SASL_PATH=$sp "$ML_BASE" --uri "$G" acquire g >/dev/null 2>&1; b=$?
    SASL_PATH=$sp "$ML_BASE" --uri "$RT12_URI" acquire "p$RANDOM" >/dev/null 2>&1; bp=$?
    echo "len~$n $kind: HEAD gssapi rc=$h plain rc=$hp | baseline gssapi rc=$b plain rc=$bp | -v: $(grep -o 'plugins loaded from .*' "$W/err" | sed 's/[:ab]\{20,\}/<long>/')"
  done
done 2>/dev/null
