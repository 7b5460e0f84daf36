#!/usr/bin/env bash
# `podshaper-operator`: usage, config errors named, and no cluster needed to refuse them.
source "$(dirname "$0")/lib.sh"
bin=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check "help exits 0 with the usage" bash -c "'$bin' --help | grep -q 'podshaper-operator run'"
check "version" bash -c "'$bin' version | grep -q '^podshaper-operator [0-9]'"
set +e; "$bin" frobnicate 2>"$tmp/err"; rc=$?; set -e
check "an unknown command exits 2" test $rc -eq 2
check "and names it" grep -q 'unknown command "frobnicate"' "$tmp/err"

# run exits 2 with one line naming the setting, before it needs a cluster.
refuses() {  # refuses "what" "config yaml" "message"
  printf '%s\n' "$2" >"$tmp/config.yaml"
  set +e; "$bin" run --kubeconfig /nonexistent --config "$tmp/config.yaml" >/dev/null 2>"$tmp/err"; rc=$?; set -e
  check "$1: exit 2" test $rc -eq 2
  check "$1: the message names it" grep -qF -- "$3" "$tmp/err"
}
refuses "an unknown key" "workres: 2" "config.yaml: workres: unknown setting"
refuses "a bad duration" "leaderElection: {leaseDuration: fifteen}" 'leaderElection.leaseDuration: "fifteen": expected a duration'
refuses "a renew deadline not below the lease" "leaderElection: {leaseDuration: 10s, renewDeadline: 10s}" "must be longer than renewDeadline"
refuses "a bad listen address" "listen: nowhere" '--listen "nowhere": expected HOST:PORT'
refuses "a certificate without its key" "tlsCertFile: /tmp/x.crt" "tlsCertFile and tlsKeyFile go together"
set +e; "$bin" run --kubeconfig /nonexistent --listen 127.0.0.1:0 2>"$tmp/err"; rc=$?; set -e
check "a missing kubeconfig exits 2" test $rc -eq 2
check "naming the file" grep -q '/nonexistent' "$tmp/err"
set +e; "$bin" run --config /nonexistent.yaml 2>"$tmp/err"; rc=$?; set -e
check "a missing config file exits 2 naming it" bash -c "test $rc -eq 2 && grep -q nonexistent.yaml '$tmp/err'"
finish
