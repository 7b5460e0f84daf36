#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (fuzz/README.md).
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--timeout S] [--bin DIR] [target...] [-- libFuzzer flags...]
#
# Builds fuzz_<target> with clang, AddressSanitizer and UBSan in build/fuzz (once;
# later runs only check), then fuzzes each target for N seconds (default 20) with
# J processes (default 1) sharing its corpus. Inputs libFuzzer finds go to
# build/fuzz/corpus/<target>/ (kept between runs), never into the repository;
# fuzz/corpus/<target> and fuzz/regressions/<target> are read as seeds. A crash,
# sanitizer report, timeout (an input slower than S seconds, default 1) or
# out-of-memory is written to build/fuzz/crashes/<target>/; the script prints one
# line per target and exits 1 if any target crashed. (A timeout whose input runs
# in time when tried again three times was the machine stalling, not the code: it
# goes to crashes/<target>/stalls/, is counted apart, and fuzzing goes on.)
#   --bin DIR   use fuzz_<target> binaries already built in DIR (no deps, no build)
#   --build-only  build the targets, fuzz nothing
# Targets: admission annotations config documents list_page nvidia_smi pod_explain quantity watch_stream (default: all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

all=(admission annotations config documents list_page nvidia_smi pod_explain quantity watch_stream)
seconds=20
jobs=1
timeout=1
bin=
build_only=no
targets=()
extra=()
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    --bin) bin=$(cd "${2:?}" && pwd); shift 2 ;;
    --build-only) build_only=yes; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage ;;
    -*) echo "fuzz: unknown option $1" >&2; usage ;;
    *)
      [[ " ${all[*]} " == *" $1 "* ]] || { echo "fuzz: unknown target $1 (targets: ${all[*]})" >&2; exit 2; }
      targets+=("$1"); shift ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
[[ $seconds =~ ^[0-9]+$ && $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --seconds and --jobs take whole numbers" >&2; exit 2; }

build=$root/build/fuzz
if [[ -z $bin ]]; then
  bash scripts/deps.sh --fuzz
  mkdir -p "$build"
  # Configured every time (a no-op in a fraction of a second when nothing changed), so
  # the build never runs on Makefiles older than the CMakeLists.
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPODSHAPER_FUZZ=ON -DPODSHAPER_SANITIZE=ON -DPODSHAPER_TCMALLOC=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; echo "fuzz: cmake failed" >&2; exit 1; }
  # Built on every core (JOBS, default nproc); --jobs is the fuzzing processes.
  if ! cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}" >"$build/build.log" 2>&1; then
    cat "$build/build.log" >&2
    echo "fuzz: build failed (log: $build/build.log)" >&2
    exit 1
  fi
  bin=$build/bin
fi
[[ $build_only == no ]] || exit 0

# Sanitizer reports end the input with a crash libFuzzer saves; LeakSanitizer as in make test-sanitize.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0}

# One fuzzing process for `seconds`. A timeout whose input runs within the limit
# when tried again three times was a stall of a loaded machine (CI shares its
# cores), not slow code: it is set aside in crashes/<target>/stalls/ and fuzzing
# goes on for the time left. Anything else ends the process and fails the target.
fuzz_one() {  # log file, then the libFuzzer arguments
  local log=$1 end=$((SECONDS + seconds)) left out artifact
  shift
  : >"$log"
  while left=$((end - SECONDS)); ((left > 0)); do
    out=$(mktemp)
    if "$exe" -max_total_time="$left" "$@" </dev/null >"$out" 2>&1; then
      cat "$out" >>"$log"; rm -f "$out"; return 0
    fi
    cat "$out" >>"$log"
    artifact=$(sed -n 's/.*Test unit written to //p' "$out" | tail -1)
    rm -f "$out"
    [[ $artifact == */timeout-* && -f $artifact ]] || return 1
    for _ in 1 2 3; do
      "$exe" -timeout="$timeout" -rss_limit_mb=2048 "$artifact" >/dev/null 2>&1 </dev/null || return 1
    done
    mkdir -p "$(dirname "$artifact")/stalls"
    mv "$artifact" "$(dirname "$artifact")/stalls/"
    echo "fuzz: $(basename "$artifact") ran within ${timeout}s three times again: a stall, set aside" >>"$log"
  done
}

failed=0
for t in "${targets[@]}"; do
  exe=$bin/fuzz_$t
  [[ -x $exe ]] || { echo "fuzz: $exe is missing" >&2; exit 1; }
  work=$build/corpus/$t crashes=$build/crashes/$t logs=$build/logs/$t
  mkdir -p "$work" "$crashes" "$logs"
  rm -f "$logs"/*.log
  before=$(find "$crashes" -maxdepth 1 -type f | LC_ALL=C sort)
  args=(-timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/")
  [[ -f fuzz/dict/$t.dict ]] && args+=(-dict="fuzz/dict/$t.dict")
  seeds=()
  for d in fuzz/corpus/$t fuzz/regressions/$t; do [[ -d $d ]] && seeds+=("$d"); done
  # J processes on one corpus directory: each reloads what the others add (-reload).
  pids=()
  started=$SECONDS
  for ((j = 0; j < jobs; j++)); do
    fuzz_one "$logs/$j.log" "${args[@]}" "${extra[@]}" "$work" "${seeds[@]}" &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  elapsed=$((SECONDS - started))

  execs=0 corpus=0 stalls=0
  for ((j = 0; j < jobs; j++)); do
    log=$logs/$j.log
    e=$(awk '/^stat::number_of_executed_units:/ { n += $2 } END { print n + 0 }' "$log")
    c=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    execs=$((execs + ${e:-0}))
    stalls=$((stalls + $(grep -c 'a stall, set aside' "$log" || true)))
    [[ ${c:-0} -gt $corpus ]] && corpus=$c
  done
  new=$(comm -13 <(echo "$before") <(find "$crashes" -maxdepth 1 -type f | LC_ALL=C sort) | grep -c . || true)
  if [[ $status -ne 0 && $new -eq 0 ]]; then new=1; fi  # died without an artifact: still a failure
  printf 'fuzz: %-12s %6ss  executions %10d  exec/s %7d  corpus %5d  crashes %d%s\n' \
    "$t" "$elapsed" "$execs" "$((execs / (elapsed > 0 ? elapsed : 1)))" "$corpus" "$new" \
    "$( ((stalls == 0)) || echo "  (stalls set aside: $stalls)")"
  if [[ $new -gt 0 ]]; then
    failed=1
    comm -13 <(echo "$before") <(find "$crashes" -maxdepth 1 -type f | LC_ALL=C sort) | sed 's/^/fuzz:   /'
    echo "fuzz:   logs: $logs/ (reproduce: $exe FILE)" >&2
  fi
done
exit $failed
