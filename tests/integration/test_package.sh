#!/usr/bin/env bash
# The Debian package: CPack builds it from this build tree; its files are where Debian puts them, its
# library dependencies come from dpkg-shlibdeps, its man page carries the version, and lintian finds no
# error in it. (Installing it needs root and changes the machine: README's install section, by hand.)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BUILD_DIR=${MONGOLOCK_BUILD_DIR:-$(dirname "$(dirname "$MONGOLOCK_BIN")")}

build_package() {
  [[ -f $BUILD_DIR/CPackConfig.cmake ]] || fail "no CPackConfig.cmake in $BUILD_DIR"
  (cd "$T" && cpack --config "$BUILD_DIR/CPackConfig.cmake" -G DEB -B "$T/out") >"$T/cpack.log" 2>&1 ||
    fail_with "cpack failed" log "$T/cpack.log"
  local debs=("$T"/out/mongolock_*_amd64.deb)
  ((${#debs[@]} == 1)) && [[ -f ${debs[0]} ]] || fail_with "no single .deb" log "$T/cpack.log"
  printf '%s\n' "${debs[0]}"
}

package_contents() {
  local deb version
  deb=$(build_package)
  version=$(sed -n 's/^project(mongolock VERSION \([0-9.]*\) .*/\1/p' "$REPO_ROOT/CMakeLists.txt")
  [[ ${deb##*/} == "mongolock_${version}_amd64.deb" ]] || fail "package named ${deb##*/}, not for version $version"
  dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's#^\./#/#' | grep -v '/$' | sort >"$T/files"
  cat >"$T/expected" <<'LIST'
/usr/bin/mongolock
/usr/share/bash-completion/completions/mongolock
/usr/share/doc/mongolock/changelog.gz
/usr/share/doc/mongolock/copyright
/usr/share/doc/mongolock/examples/crontab
/usr/share/doc/mongolock/examples/fenced-write
/usr/share/doc/mongolock/examples/mongolock.conf
/usr/share/doc/mongolock/examples/nightly-report.service
/usr/share/doc/mongolock/examples/nightly-report.timer
/usr/share/fish/vendor_completions.d/mongolock.fish
/usr/share/man/man1/mongolock.1.gz
/usr/share/zsh/vendor-completions/_mongolock
LIST
  diff -u "$T/expected" "$T/files" >"$T/diff" || fail_with "unexpected file list" diff "$T/diff"
  # Control fields: the version, and library dependencies computed by dpkg-shlibdeps.
  dpkg-deb -f "$deb" Version >"$T/version"
  assert_eq "$(cat "$T/version")" "$version" "package version"
  dpkg-deb -f "$deb" Depends >"$T/depends"
  if [[ $(sed -n 's/^MONGOLOCK_STATIC_DRIVER:BOOL=//p' "$BUILD_DIR/CMakeCache.txt") == OFF ]]; then
    assert_matches "$T/depends" 'libmongoc-1\.0-0 \(>= [0-9.]+\)'
  else
    # libmongoc from its archive (MONGOLOCK_STATIC_DRIVER, the default): no dependency on its package; on
    # libbson's, which stays shared, and on what libmongoc itself needs (libmongocrypt here).
    assert_not_contains "$T/depends" "libmongoc-1.0-0"
    assert_matches "$T/depends" 'libbson-1\.0-0 \(>= [0-9.]+\)'
    assert_matches "$T/depends" '(^|, )libmongocrypt0(,| |$)'
  fi
  assert_matches "$T/depends" '(^|, )libsasl2-2 \(>= [0-9]' # called directly (mongo_store.hpp: defer_sasl_plugins)
  assert_matches "$T/depends" 'libstdc\+\+6 \(>= '
  assert_not_contains "$T/depends" "libfmt" # fmt is used header-only: no run-time dependency
  # What it installs is what this build made: the binary runs, the man page has the version, the
  # completion scripts are mongolock's own output.
  mkdir "$T/root"
  dpkg-deb -x "$deb" "$T/root"
  "$T/root/usr/bin/mongolock" --version >"$T/v"
  assert_matches "$T/v" "^mongolock ${version//./\\.} \(libmongoc "
  zcat "$T/root/usr/share/man/man1/mongolock.1.gz" >"$T/man"
  head -n 1 "$T/man" >"$T/th"
  assert_contains "$T/th" "\"mongolock $version\""
  ml completion bash >"$T/bash"
  cmp -s "$T/bash" "$T/root/usr/share/bash-completion/completions/mongolock" ||
    fail "the packaged bash completion is not 'mongolock completion bash'"
  # The example config file is one mongolock accepts.
  expect_exit 0 -- env MONGOLOCK_URI="$MONGOLOCK_TEST_URI" "$MONGOLOCK_BIN" \
    --config "$T/root/usr/share/doc/mongolock/examples/mongolock.conf" doctor
}

lintian_finds_no_error() {
  local deb
  deb=$(build_package)
  lintian "$deb" >"$T/lintian" 2>&1 || true
  # The README lists the warnings it may give; errors fail the test.
  if grep -q '^E:' "$T/lintian"; then fail_with "lintian reports errors" lintian "$T/lintian"; fi
  if grep -q '^W:' "$T/lintian"; then fail_with "lintian reports warnings" lintian "$T/lintian"; fi
}

command -v cpack >/dev/null && command -v lintian >/dev/null && command -v dpkg-deb >/dev/null ||
  { echo "FAIL: cpack, lintian and dpkg-deb are needed (scripts/setup installs them)"; exit 1; }
run_case "the .deb: files at Debian's places, shlibdeps, version, its own completions, example config" package_contents
run_case "lintian: no errors and no warnings" lintian_finds_no_error
finish
