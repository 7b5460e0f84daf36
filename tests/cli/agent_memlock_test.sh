#!/usr/bin/env bash
# The agent's memlock-probe, as the DaemonSet runs it: `podshaper-agent memlock-probe`
# writes its RLIMIT_MEMLOCK and waits for SIGTERM; `podshaper-agent run` checks its
# --memlock-probe-* flags before it reaches for a cluster. What `run` then writes into the
# report is checked against a real API server in tests/e2e/agent_e2e_test.sh.
source "$(dirname "$0")/lib.sh"
bin=$1; root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- memlock-probe: its limit, in a file renamed into place, then it waits for SIGTERM.
probe_file=$tmp/run/limits
mkdir -p "$tmp/run"
# A soft limit of 4 MiB, as the NRI annotation would set it (lowering needs no privilege).
(ulimit -S -l 4096 && exec "$bin" memlock-probe --output "$probe_file") 2>"$tmp/probe.err" &
probe=$!
# The file, then the line on stderr that follows its rename.
for _ in $(seq 100); do [[ -s $probe_file ]] && grep -q "RLIMIT_MEMLOCK" "$tmp/probe.err" && break; sleep 0.1; done
hard=$(python3 -c 'import resource; h = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]; print("null" if h == resource.RLIM_INFINITY else h)')
check "memlock-probe writes the RLIMIT_MEMLOCK it got" \
  test "$(cat "$probe_file" 2>/dev/null)" == "{\"hard\":$hard,\"soft\":4194304}"
check "through a temporary file that is gone" test ! -e "$probe_file.tmp"
check "and says so on stderr" grep -q "memlock-probe: RLIMIT_MEMLOCK soft 4194304 hard" "$tmp/probe.err"
check "then keeps running" kill -0 $probe
kill -TERM $probe
set +e; wait $probe; rc=$?; set -e
check "SIGTERM: it exits 0" test $rc -eq 0
set +e; "$bin" memlock-probe 2>"$tmp/err"; rc=$?; set -e
check "without --output: exit 2, naming it" bash -c "[[ $rc -eq 2 ]] && grep -q -- '--output is required' '$tmp/err'"
set +e; "$bin" memlock-probe --output "$tmp/missing/dir/limits" 2>"$tmp/err"; rc=$?; set -e
check "an output it cannot write: exit 2, naming the file" bash -c "[[ $rc -eq 2 ]] && grep -q 'missing/dir/limits.tmp' '$tmp/err'"

# --- run's flags are checked before it reaches for a cluster.
refuses() {  # refuses "what" "message" FLAGS...
  local what=$1 msg=$2; shift 2
  set +e; "$bin" run --node gpu-0 --kubeconfig /nonexistent "$@" >/dev/null 2>"$tmp/err"; local rc=$?; set -e
  check "$what: exit 2" test $rc -eq 2
  check "$what: says why" grep -qF -- "$msg" "$tmp/err"
}
refuses "--memlock-probe-pod alone" "--memlock-probe-pod needs --memlock-probe-file" --memlock-probe-pod a/b
refuses "--memlock-requested alone" "--memlock-requested needs --memlock-probe-file" --memlock-requested 4Mi
refuses "a bad --memlock-requested" '--memlock-requested: "lots" is neither unlimited nor a quantity of bytes' \
  --memlock-probe-file "$probe_file" --memlock-requested lots
refuses "a pod that is not NAMESPACE/NAME" '--memlock-probe-pod "agent-0": expected NAMESPACE/NAME' \
  --memlock-probe-file "$probe_file" --memlock-probe-pod agent-0
check "the usage text names the memlock-probe" contains "$("$bin" help)" "podshaper-agent memlock-probe --output FILE"

finish
