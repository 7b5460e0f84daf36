#!/usr/bin/env bash
# `scripts/cluster.sh down-all`, what `make test` runs first (and the real-node tests, and
# scripts/node.sh before it takes the machine's one real node): every cluster of this
# checkout that runs is stopped, a line each; a cluster of another checkout, a process that
# took a recorded pid, and a stopped cluster are left alone. Run on copies of the scripts
# in a checkout of its own, with stand-in processes (copies of sleep named as the control
# plane's binaries), so it touches no real cluster. The real order, `make demo` then `make
# test`, is .ci/run's.
source "$(dirname "$0")/../cli/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

here=$tmp/checkout other=$tmp/other-checkout
for c in "$here" "$other"; do
  mkdir -p "$c/scripts"
  cp "$root/scripts/cluster.sh" "$root/scripts/procs.sh" "$c/scripts/"
done
mkdir -p "$tmp/bin"
for b in etcd kube-apiserver; do cp "$(command -v sleep)" "$tmp/bin/$b"; done

# fake_cluster DIR NAME...: a cluster dir whose pids/ records running stand-ins for NAME...
fake_cluster() {
  local d=$1 b; shift
  mkdir -p "$d/pids" "$d/logs"
  for b in "$@"; do
    "$tmp/bin/$b" 600 &
    pids+=($!)
    echo $! >"$d/pids/$b.pid"
  done
}
alive() { kill -0 "$(cat "$1")" 2>/dev/null; }

fake_cluster "$here/.cluster" etcd kube-apiserver       # as make demo leaves it
fake_cluster "$here/build/e2e-realnode-cluster" etcd    # a killed test's
fake_cluster "$other/.cluster" etcd kube-apiserver      # another checkout's demo
mkdir -p "$here/build/e2e-cluster/pids"                 # stopped: its pid is gone
sleep 600 & pids+=($!)
echo "${pids[-1]}" >"$here/build/e2e-cluster/pids/etcd.pid"  # ...and taken by another program
mkdir -p "$here/build/bin"                               # not a cluster

out=$(bash "$here/scripts/cluster.sh" down-all 2>&1); rc=$?
echo "$out" | sed 's/^/    /'
check "down-all succeeds" test "$rc" = 0
check "one line for each cluster of this checkout that ran, two in all" test "$(grep -c . <<<"$out")" = 2
check "the demo's: says make demo or make cluster-up left it in .cluster, and how to start it again" \
  grep -q "^cluster: stopping the cluster make demo or make cluster-up left running in .cluster (.*make cluster-up starts it again)" <<<"$out"
check "the killed test's: names build/e2e-realnode-cluster" \
  grep -q "^cluster: stopping the cluster an earlier run left running in build/e2e-realnode-cluster" <<<"$out"
check "the demo's stand-ins are stopped and their pid files gone" \
  test ! -e "$here/.cluster/pids/etcd.pid" -a ! -e "$here/.cluster/pids/kube-apiserver.pid"
check "the killed test's stand-in is stopped" test ! -e "$here/build/e2e-realnode-cluster/pids/etcd.pid"
check "another checkout's cluster still runs" alive "$other/.cluster/pids/etcd.pid"
check "a program that took a stopped cluster's recorded pid still runs" alive "$here/build/e2e-cluster/pids/etcd.pid"

out=$(bash "$here/scripts/cluster.sh" down-all 2>&1); rc=$?
check "again: nothing runs, nothing said" test "$rc:$out" = "0:"

# EXCEPT: the cluster that asks (scripts/node.sh's, taking the real node) is not stopped.
fake_cluster "$here/.cluster" etcd
fake_cluster "$here/build/e2e-installed-cluster" etcd
out=$(bash "$here/scripts/cluster.sh" down-all "$here/build/e2e-installed-cluster" 2>&1)
check "down-all EXCEPT stops the others" test ! -e "$here/.cluster/pids/etcd.pid"
check "... and not the one it names" alive "$here/build/e2e-installed-cluster/pids/etcd.pid"
check "... in one line" test "$(grep -c . <<<"$out")" = 1
finish
