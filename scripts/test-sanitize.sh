#!/usr/bin/env bash
# make test-sanitize: every target built in build/sanitize with
# -fsanitize=address,undefined (CMake option PODSHAPER_SANITIZE), then every test that
# needs no cluster. A sanitizer report (memory error, leak, undefined behaviour) ends
# the process with an error, so the test that caused it fails and prints the report.
#   --build-only   build, run nothing (.ci/run builds early, beside the other steps)
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=no
case ${1:-} in
  "") ;;
  --build-only) build_only=yes ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac
dir=${SANITIZE_DIR:-build/sanitize}
jobs=${JOBS:-$(nproc)}
[[ -f $dir/CMakeCache.txt ]] ||
  cmake -S . -B "$dir" -DPODSHAPER_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j "$jobs"
[[ $build_only == no ]] || exit 0
# halt_on_error + abort: the first report is the one that counts, and a test's exit
# status shows it. detect_leaks: LeakSanitizer at every process exit.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitize/lsan.supp:print_suppressions=0
cd "$dir"
# e2e_*, install_chart and images run against a cluster, helm or Docker: make test has them.
ctest --output-on-failure -j "$jobs" -E '^(e2e_|install_|images$)'
