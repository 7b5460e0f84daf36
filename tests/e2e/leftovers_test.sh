#!/usr/bin/env bash
# `scripts/cluster.sh down-all`, what `make test` runs first (and make demo, make clean, the
# real-node tests), and `down-other DIR`, what scripts/node.sh runs before it takes the
# machine's one real node: every cluster of this checkout that runs is stopped, a line each;
# a cluster of another checkout (beside it or nested in it), a process that took a recorded
# pid, and a stopped cluster are left alone. Run on copies of the scripts in a checkout of
# its own, with stand-in processes (copies of sleep named as the control plane's binaries)
# and a lock file of its own, so it touches no real cluster. The real order, `make demo`
# then `make test`, is .ci/run's.
source "$(dirname "$0")/../cli/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

here=$tmp/checkout other=$tmp/other-checkout nested=$tmp/checkout/wt
for c in "$here" "$other" "$nested"; do
  mkdir -p "$c/scripts" "$c/.git"
  cp "$root/scripts/cluster.sh" "$root/scripts/procs.sh" "$c/scripts/"
done
mkdir -p "$tmp/bin"
for b in etcd kube-apiserver; do cp "$(command -v sleep)" "$tmp/bin/$b"; done
export PODSHAPER_NODE_LOCK=$tmp/node.lock

# fake_cluster DIR NAME...: a cluster dir whose pids/ records running stand-ins for NAME...
fake_cluster() {
  local d=$1 b; shift
  mkdir -p "$d/pids" "$d/logs"
  for b in "$@"; do
    "$tmp/bin/$b" 600 &
    pids+=($!)
    echo $! >"$d/pids/$b.pid"
  done
  cp "$d/pids/"*.pid "$d/logs/" 2>/dev/null || true  # what it ran, kept to check after its down
}
# alive DIR NAME: the stand-in DIR recorded for NAME still runs
alive() { kill -0 "$(cat "$1/logs/$2.pid")" 2>/dev/null; }
stopped() { ! alive "$@" && [[ ! -e $1/pids/$2.pid ]]; }
# run_here VERB [ARGS...]: cluster.sh VERB in this test's checkout; its output in $out, status in $rc
run_here() { rc=0; out=$(bash "$here/scripts/cluster.sh" "$@" 2>&1) || rc=$?; echo "$out" | sed 's/^/    /'; }

fake_cluster "$here/.cluster" etcd kube-apiserver       # as make demo leaves it
fake_cluster "$here/build/e2e-realnode-cluster" etcd    # a killed test's
fake_cluster "$here/clusters/mine" etcd                 # elsewhere in it, holding the real node
echo "$here/clusters/mine/node" >"$PODSHAPER_NODE_LOCK"
fake_cluster "$other/.cluster" etcd kube-apiserver      # another checkout's demo
fake_cluster "$nested/.cluster" etcd                    # a worktree inside this checkout
mkdir -p "$here/build/e2e-cluster/pids" "$here/build/e2e-cluster/logs"  # stopped: its pid is gone
sleep 600 & pids+=($!)
echo "${pids[-1]}" | tee "$here/build/e2e-cluster/pids/etcd.pid" >"$here/build/e2e-cluster/logs/etcd.pid"  # ...and taken by another program
mkdir -p "$here/build/bin"                               # not a cluster

run_here down-all
check "down-all succeeds" test "$rc" = 0
check "one line for each cluster of this checkout that ran, three in all" test "$(grep -c . <<<"$out")" = 3
check "the demo's: says make demo or make cluster-up left it in .cluster, and how to start it again" \
  grep -q "^cluster: stopping the cluster make demo or make cluster-up left running in .cluster (make cluster-up starts it again)" <<<"$out"
check "the killed test's: names build/e2e-realnode-cluster" \
  grep -q "^cluster: stopping the cluster an earlier run left running in build/e2e-realnode-cluster$" <<<"$out"
check "the real node's holder: names clusters/mine" \
  grep -q "^cluster: stopping the cluster an earlier run left running in clusters/mine$" <<<"$out"
check "the demo's stand-ins are stopped, their pid files gone" \
  bash -c "$(declare -f alive stopped); stopped '$here/.cluster' etcd && stopped '$here/.cluster' kube-apiserver"
check "the killed test's stand-in is stopped" stopped "$here/build/e2e-realnode-cluster" etcd
check "the holder's stand-in is stopped" stopped "$here/clusters/mine" etcd
check "another checkout's cluster still runs" alive "$other/.cluster" etcd
check "a worktree's inside this checkout still runs" alive "$nested/.cluster" etcd
check "a program that took a stopped cluster's recorded pid still runs" alive "$here/build/e2e-cluster" etcd

run_here down-all
check "again: nothing runs, nothing said" test "$rc:$out" = "0:"

# down-other DIR: the holder only (scripts/node.sh), and only if it is this checkout's.
fake_cluster "$here/.cluster" etcd
fake_cluster "$here/build/e2e-installed-cluster" etcd
run_here down-other "$here/build/e2e-installed-cluster"
check "down-other stops the cluster it names, in one line" test "$rc:$(grep -c . <<<"$out")" = "0:1"
check "... and that one" stopped "$here/build/e2e-installed-cluster" etcd
check "... not another of this checkout's" alive "$here/.cluster" etcd
run_here down-other "$other/.cluster"
check "down-other refuses another checkout's cluster, saying so" \
  test "$rc:$out" = "1:cluster: the cluster in $other/.cluster is not this checkout's: left alone"
check "... which still runs" alive "$other/.cluster" etcd
run_here down-other "$nested/.cluster"
check "... and a nested worktree's" test "$rc" = 1
check "... which still runs" alive "$nested/.cluster" etcd

# BUILD_DIR outside the checkout (make test BUILD_DIR=...): the Makefile names it.
fake_cluster "$tmp/custom-build/e2e-cluster" etcd
PODSHAPER_BUILD_DIR=$tmp/custom-build run_here down-all
check "the Makefile's BUILD_DIR: its clusters are this checkout's too" stopped "$tmp/custom-build/e2e-cluster" etcd
check "... .cluster stopped with it, two lines" test "$rc:$(grep -c . <<<"$out")" = "0:2"

# The cluster the command names (a test's own, PODSHAPER_CLUSTER_DIR), wherever it is.
fake_cluster "$tmp/own-cluster" etcd
PODSHAPER_CLUSTER_DIR=$tmp/own-cluster run_here down-all
check "the cluster PODSHAPER_CLUSTER_DIR names is stopped too, in one line" test "$rc:$(grep -c . <<<"$out")" = "0:1"
check "... and that one" stopped "$tmp/own-cluster" etcd
check "... another checkout's still runs" alive "$other/.cluster" etcd
finish
