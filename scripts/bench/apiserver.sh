#!/usr/bin/env bash
# Pod creates through the real API server, with and without podshaper-webhook in the
# path (issue 7): what the webhook adds to a pod create, as a client sees it and as the
# API server's own admission metrics see it. Target: ≤ 2 ms added p99.
#
#   scripts/bench/apiserver.sh [--count N] [--rounds R] [--concurrency C] [--json FILE] [--out DIR]
#                              [--with-scheduler]
#
# A loopback control plane of its own (scripts/cluster.sh, in build/bench-apiserver-cluster,
# podshaper-webhook registered as in the e2e tests) and one namespace. After a warm-up
# (100 creates, half of them opted in), the runs alternate between plain pods (no
# podshaper.io/inject label: the webhook's objectSelector skips the call) and opted-in
# ones (the same pod with the label: the webhook is called and shapes it), so both share
# the machine's noise:
#   R rounds (default 3) of N/R sequential creates each (concurrency 1: latency), the order
#   flipped every round (plain first, opted-in first, plain first, ...),
#   then one run of N creates each at concurrency C (default 8: throughput).
# Every run deletes its pods afterwards (grace period 0; not timed).
# The API server's /metrics (and the webhook's own) are read after every run; their
# differences give, for the opted-in runs, apiserver_admission_webhook_admission_duration_seconds
# of pods.podshaper.io (p99 as a bucket bound: its smallest buckets are 5 ms and 25 ms)
# and its mean (_sum/_count), the webhook request and rejection counters, and for every
# run the API server's own POST pods duration mean.
#
# By default the pods name a scheduler that does not run (spec.schedulerName
# podshaper-bench-none): no kubelet runs here, so the cluster's 20 GPUs take 2 of these
# 8-GPU pods, and kube-scheduler would retry the rest and write a status condition and an
# event for each, extra API writes competing with the measurement (and more for the
# opted-in pods, whose node-exclusive anti-affinity costs the scheduler more).
# --with-scheduler leaves spec.schedulerName unset.
#
# Prints a summary; --json FILE writes everything (runs, metrics, verdict). The raw files
# (each run's podcreate JSON and latencies, each /metrics snapshot) stay in DIR (default
# build/bench/apiserver).
# PODSHAPER_BIN: where podshaper-webhook is (default build/bin). The cluster is torn down
# on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=${PODSHAPER_CONTROLPLANE_BIN:-$root/build/controlplane}:$PATH  # its kubectl
count=1000
concurrency=8
rounds=3
json_out=""
out=$root/build/bench/apiserver
scheduler=podshaper-bench-none
usage() { echo "usage: $0 [--count N] [--rounds R] [--concurrency C] [--json FILE] [--out DIR] [--with-scheduler]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --count) count=${2:?}; shift 2 ;;
    --concurrency) concurrency=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --json) json_out=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --with-scheduler) scheduler=""; shift ;;
    *) usage ;;
  esac
done
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 ]] || usage
[[ $count =~ ^[0-9]+$ && $count -ge $rounds ]] || { echo "apiserver bench: --count must be >= --rounds" >&2; exit 2; }
[[ $concurrency =~ ^[0-9]+$ && $concurrency -ge 1 ]] || usage
[[ -z $json_out || $json_out == /* ]] || json_out=$PWD/$json_out

log() { echo "apiserver bench: $*" >&2; }
export PODSHAPER_CLUSTER_DIR=$root/build/bench-apiserver-cluster
cluster=$PODSHAPER_CLUSTER_DIR
kubeconfig=$cluster/kubeconfig
ns=podcreate-bench
podcreate=$(bash "$root/scripts/bench-build.sh" | grep '/podshaper-podcreate$')
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.prom
tmp=$(cd "$out" && pwd)
trap 'bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true' EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before: $load_before ($(nproc) cores)"
bash "$root/scripts/cluster.sh" down >/dev/null 2>&1 || true  # a cluster left by a killed run is not reused
bash "$root/scripts/cluster.sh" up
source "$cluster/env"
kc create namespace "$ns" >/dev/null
for _ in $(seq 150); do kc -n "$ns" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done
kc -n "$ns" get serviceaccount default >/dev/null

# snapshot NAME: both servers' /metrics after a run.
snapshot() {
  kc get --raw /metrics >"$tmp/$1.apiserver.prom"
  curl -sf --cacert "$cluster/pki/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/metrics" >"$tmp/$1.webhook.prom" ||
    : >"$tmp/$1.webhook.prom"
}
# cpu NAME: CPU seconds (user + system) each control-plane process has used so far.
ticks=$(getconf CLK_TCK)
cpu() {
  local name first=1
  { echo -n "{"
    for name in etcd kube-apiserver podshaper-webhook kube-scheduler kube-controller-manager; do
      [[ $first == 1 ]] || echo -n ", "; first=0
      awk -v n="$name" -v t="$ticks" '{ sub(/^.*\) /, ""); printf "\"%s\": %.3f", n, ($12 + $13) / t }' \
        "/proc/$(cat "$cluster/pids/$name.pid")/stat"
    done
    echo "}"; } >"$tmp/$1.cpu.json"
}
# clear_pods: delete every pod of the namespace (one deletecollection, grace period 0: no
# kubelet runs) and wait until none is listed.
clear_pods() {
  kc delete --raw "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=0" >/dev/null
  for _ in $(seq 300); do [[ -z $(kc -n "$ns" get pods -o name) ]] && return 0; sleep 0.2; done
  echo "apiserver bench: pods of $ns still listed after 60 s" >&2; return 1
}
runs=()
# create NAME plain|opt-in N C: one podcreate run between two CPU readings, then the
# /metrics snapshots, then its pods deleted (not timed, not in the CPU readings).
create() {
  local name=$1 mode=$2 n=$3 c=$4
  local flags=(--kubeconfig "$kubeconfig" --namespace "$ns" --count "$n" --concurrency "$c"
               --scheduler-name "$scheduler" --json --samples "$tmp/$name.samples.json")
  [[ $mode == opt-in ]] && flags+=(--opt-in)
  cpu "$name.before"
  "$podcreate" "${flags[@]}" >"$tmp/$name.json"
  cpu "$name.after"
  snapshot "$name"
  clear_pods
  runs+=("$name")
  python3 - "$tmp/$name.json" "$name" <<'PY' >&2
import json, sys
r = json.load(open(sys.argv[1])); l = r["latency_ms"]
print(f"apiserver bench: {sys.argv[2]:>16}: {r['ok']}/{r['count']} ok, {r['creates_per_s']:7.1f} creates/s, "
      f"p50 {l['p50']:.3f} p99 {l['p99']:.3f} max {l['max']:.3f} ms, shaped {r['shaped']}, errors {r['errors']}")
PY
}

log "warm-up: 50 plain + 50 opted-in creates"
"$podcreate" --kubeconfig "$kubeconfig" --namespace "$ns" --count 50 --scheduler-name "$scheduler" --cleanup --json >/dev/null
"$podcreate" --kubeconfig "$kubeconfig" --namespace "$ns" --count 50 --scheduler-name "$scheduler" --cleanup --json --opt-in >/dev/null
clear_pods
snapshot warmup

per_round=$((count / rounds))
for round in $(seq "$rounds"); do
  if ((round % 2 == 1)); then order=(plain opt-in); else order=(opt-in plain); fi
  for mode in "${order[@]}"; do create "seq$round-$mode" "$mode" "$per_round" 1; done
done
create "conc-plain" plain "$count" "$concurrency"
create "conc-opt-in" opt-in "$count" "$concurrency"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average after: $load_after"

python3 - "$tmp" "$json_out" "$count" "$concurrency" "$load_before" "$load_after" "$(nproc)" "${scheduler:-default-scheduler}" "${runs[@]}" <<'PY'
import json, math, random, re, sys
tmp, json_out, count, concurrency, load_before, load_after, cores, scheduler = sys.argv[1:9]
runs = sys.argv[9:]
WEBHOOK = "pods.podshaper.io"
line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

def parse(path):
    out = []
    for line in open(path):
        if line.startswith("#"):
            continue
        m = line_re.match(line)
        if m:
            out.append((m[1], dict(label_re.findall(m[2] or "")), float(m[3])))
    return out

def total(samples, metric, /, **want):
    return sum(v for n, l, v in samples if n == metric and all(l.get(k) == x for k, x in want.items()))

def buckets(samples, metric, /, **want):
    b = {}
    for n, l, v in samples:
        if n == metric + "_bucket" and all(l.get(k) == x for k, x in want.items()):
            le = math.inf if l["le"] == "+Inf" else float(l["le"])
            b[le] = b.get(le, 0) + v
    return b

def counters(samples, metric, keys, /, **want):
    c = {}
    for n, l, v in samples:
        if n == metric and all(l.get(k) == x for k, x in want.items()):
            key = ",".join(f"{k}={l.get(k, '')}" for k in keys)
            c[key] = c.get(key, 0) + v
    return c

def diff_hist(a, b, metric, /, **want):
    """The histogram's increase between two snapshots: count, mean (ms), bucket counts, p99 bound."""
    ba, bb = buckets(a, metric, **want), buckets(b, metric, **want)
    d = {le: bb.get(le, 0) - ba.get(le, 0) for le in sorted(bb)}
    n = total(b, metric + "_count", **want) - total(a, metric + "_count", **want)
    s = total(b, metric + "_sum", **want) - total(a, metric + "_sum", **want)
    res = {"count": int(n), "mean_ms": round(s / n * 1e3, 3) if n else None,
           "buckets": {("+Inf" if le == math.inf else f"{le * 1e3:g}ms"): int(v) for le, v in d.items()}}
    for q in (50, 99):
        bound = None
        for le, v in d.items():
            if n and v >= q / 100 * n:
                bound = le
                break
        res[f"p{q}_le_ms"] = None if bound is None else ("+Inf" if bound == math.inf else round(bound * 1e3, 3))
    return res

def diff_counters(a, b, metric, keys, /, **want):
    ca, cb = counters(a, metric, keys, **want), counters(b, metric, keys, **want)
    return {k: int(v - ca.get(k, 0)) for k, v in cb.items() if v - ca.get(k, 0)}

def nearest(sorted_ms, p):
    if not sorted_ms:
        return None
    rank = min(max(math.ceil(p / 100 * len(sorted_ms)), 1), len(sorted_ms))
    return sorted_ms[rank - 1]

snaps = {name: (parse(f"{tmp}/{name}.apiserver.prom"), parse(f"{tmp}/{name}.webhook.prom")) for name in ["warmup"] + runs}
report = {"count": int(count), "concurrency": int(concurrency), "cores": int(cores), "scheduler": scheduler,
          "load_average_before": load_before, "load_average_after": load_after, "runs": {}}
prev = "warmup"
for name in runs:
    r = json.load(open(f"{tmp}/{name}.json"))
    a, b = snaps[prev][0], snaps[name][0]
    # The API server's own time for the creates (POST pods), all admission included.
    r["apiserver_post_pods"] = diff_hist(a, b, "apiserver_request_duration_seconds", verb="POST", resource="pods", subresource="")
    c0, c1 = (json.load(open(f"{tmp}/{name}.{w}.cpu.json")) for w in ("before", "after"))
    # CPU milliseconds per created pod, by process (the client: podshaper-podcreate's own).
    r["cpu_s"] = {p: round(c1[p] - c0[p], 3) for p in c1}
    r["cpu_s"]["podshaper-podcreate"] = r["client_cpu_s"]
    r["cpu_ms_per_create"] = {p: round((c1[p] - c0[p]) * 1e3 / r["ok"], 3) for p in c1} if r["ok"] else {}
    r["cpu_ms_per_create"]["podshaper-podcreate"] = round(r["client_cpu_s"] * 1e3 / r["ok"], 3) if r["ok"] else None
    r["webhook_calls"] = diff_hist(a, b, "apiserver_admission_webhook_admission_duration_seconds", name=WEBHOOK, type="admit", operation="CREATE")["count"]
    report["runs"][name] = r
    prev = name

seq = {m: [x for name in runs if name.startswith("seq") and name.endswith("-" + m)
           for x in json.load(open(f"{tmp}/{name}.samples.json"))] for m in ("plain", "opt-in")}
summary = {}
for m, xs in seq.items():
    xs = sorted(xs)
    summary[m] = {"n": len(xs), "mean": round(sum(xs) / len(xs), 3) if xs else None,
                  "p50": nearest(xs, 50), "p90": nearest(xs, 90), "p99": nearest(xs, 99), "max": nearest(xs, 100),
                  "creates_per_s_seq": round(sum(report["runs"][n]["ok"] for n in runs if n.startswith("seq") and n.endswith("-" + m))
                                             / sum(report["runs"][n]["wall_s"] for n in runs if n.startswith("seq") and n.endswith("-" + m)), 1),
                  "creates_per_s_concurrent": report["runs"][f"conc-{m}"]["creates_per_s"],
                  "concurrent_p50": report["runs"][f"conc-{m}"]["latency_ms"]["p50"],
                  "concurrent_p99": report["runs"][f"conc-{m}"]["latency_ms"]["p99"]}
added = {k: round(summary["opt-in"][k] - summary["plain"][k], 3) for k in ("mean", "p50", "p90", "p99")}
# How much the added p99 moves with the samples: a bootstrap (each mode resampled alone).
rng = random.Random(7)
diffs = sorted(nearest(sorted(rng.choices(seq["opt-in"], k=len(seq["opt-in"]))), 99) -
               nearest(sorted(rng.choices(seq["plain"], k=len(seq["plain"]))), 99) for _ in range(1000))
added["p99_bootstrap_95"] = [round(diffs[25], 3), round(diffs[974], 3)]
# Round by round (each round's opted-in run minus its plain run).
added["p99_by_round"] = [round(report["runs"][f"seq{i}-opt-in"]["latency_ms"]["p99"] - report["runs"][f"seq{i}-plain"]["latency_ms"]["p99"], 3)
                         for i in range(1, 1 + sum(1 for n in runs if n.startswith("seq") and n.endswith("-plain")))]
added["p50_by_round"] = [round(report["runs"][f"seq{i}-opt-in"]["latency_ms"]["p50"] - report["runs"][f"seq{i}-plain"]["latency_ms"]["p50"], 3)
                         for i in range(1, 1 + len(added["p99_by_round"]))]
report["sequential_ms"] = summary
report["added_ms"] = added
# CPU per created pod, by process: sequential runs pooled, and the concurrent run.
cpu = {}
for m in ("plain", "opt-in"):
    for phase, names in (("sequential", [n for n in runs if n.startswith("seq") and n.endswith("-" + m)]), ("concurrent", [f"conc-{m}"])):
        ok = sum(report["runs"][n]["ok"] for n in names)
        procs = report["runs"][names[0]]["cpu_s"].keys()
        cpu[f"{phase}-{m}"] = {p: round(sum(report["runs"][n]["cpu_s"][p] for n in names) * 1e3 / ok, 3) for p in procs}
        cpu[f"{phase}-{m}"]["total"] = round(sum(cpu[f"{phase}-{m}"].values()), 3)
report["cpu_ms_per_create"] = cpu

# The API server's view, from the warm-up's end: sequential opted-in runs, concurrent, all.
wb = "apiserver_admission_webhook_admission_duration_seconds"
last_seq = [n for n in runs if n.startswith("seq")][-1]
apis = {"warmup": snaps["warmup"][0], "seq_end": snaps[last_seq][0], "end": snaps[runs[-1]][0]}
def hook_view(a, b):
    return {"admission_duration": diff_hist(a, b, wb, name=WEBHOOK, type="admit", operation="CREATE"),
            "request_total": diff_counters(a, b, "apiserver_admission_webhook_request_total", ["code", "rejected"], name=WEBHOOK),
            "rejection_count": diff_counters(a, b, "apiserver_admission_webhook_rejection_count", ["error_type", "rejection_code"], name=WEBHOOK),
            "fail_open_count": diff_counters(a, b, "apiserver_admission_webhook_fail_open_count", ["type"], name=WEBHOOK)}
report["apiserver_webhook"] = {"sequential": hook_view(apis["warmup"], apis["seq_end"]),
                               "concurrent": hook_view(apis["seq_end"], apis["end"]),
                               "all": hook_view(apis["warmup"], apis["end"])}
# The webhook's own time per request (header in to response out; finer buckets).
wh = {"warmup": snaps["warmup"][1], "seq_end": snaps[last_seq][1], "end": snaps[runs[-1]][1]}
report["webhook_server"] = {
    "sequential": diff_hist(wh["warmup"], wh["seq_end"], "podshaper_http_request_duration_seconds", path="/mutate-v1-pod"),
    "concurrent": diff_hist(wh["seq_end"], wh["end"], "podshaper_http_request_duration_seconds", path="/mutate-v1-pod")}

errors = sum(r["errors"] for r in report["runs"].values())
hook_all = report["apiserver_webhook"]["all"]
bad_codes = {k: v for k, v in hook_all["request_total"].items() if not k.startswith("code=200,")}
report["errors"] = errors
report["verdict"] = {"target": "the webhook adds <= 2 ms to a sequential pod create's p99 (client side, opted-in minus plain)",
                     "added_p99_ms": added["p99"], "pass": added["p99"] <= 2.0 and errors == 0 and not bad_codes
                     and not hook_all["rejection_count"] and not hook_all["fail_open_count"]}

def f(x): return "-" if x is None else f"{x:.3f}"
print(f"pod creates through the API server: {count} per mode, {cores} cores, load average {load_before} before, {load_after} after; scheduler: {scheduler}")
print()
print("per run (client side, each Create call):")
for name in runs:
    r = report["runs"][name]; l = r["latency_ms"]; s = r["apiserver_post_pods"]
    print(f"  {name:>14}  n={r['count']:<5} c={r['concurrency']:<2} {r['creates_per_s']:8.1f}/s  p50 {f(l['p50'])}  p99 {f(l['p99'])}  max {f(l['max'])} ms"
          f"  | apiserver POST mean {f(s['mean_ms'])} ms  webhook calls {r['webhook_calls']}  shaped {r['shaped']}  errors {r['errors']}")
print()
p, o = summary["plain"], summary["opt-in"]
print(f"                            without webhook   with webhook    added")
print(f"  creates/s, concurrency {concurrency:<2}  {p['creates_per_s_concurrent']:>12.1f}   {o['creates_per_s_concurrent']:>12.1f}   {o['creates_per_s_concurrent'] - p['creates_per_s_concurrent']:+8.1f}")
print(f"  creates/s, sequential     {p['creates_per_s_seq']:>12.1f}   {o['creates_per_s_seq']:>12.1f}   {o['creates_per_s_seq'] - p['creates_per_s_seq']:+8.1f}")
for k in ("mean", "p50", "p90", "p99", "max"):
    print(f"  sequential {k:<4} ms        {f(p[k]):>12}   {f(o[k]):>12}   {(o[k] - p[k]):+8.3f}")
print(f"  concurrent p50 ms         {f(p['concurrent_p50']):>12}   {f(o['concurrent_p50']):>12}   {o['concurrent_p50'] - p['concurrent_p50']:+8.3f}")
print(f"  concurrent p99 ms         {f(p['concurrent_p99']):>12}   {f(o['concurrent_p99']):>12}   {o['concurrent_p99'] - p['concurrent_p99']:+8.3f}")
print()
print("CPU ms per created pod (user + system, from /proc/PID/stat and the client's getrusage; background work of the run's span included):")
procs = ["kube-apiserver", "etcd", "podshaper-webhook", "podshaper-podcreate", "kube-controller-manager", "kube-scheduler", "total"]
print("  " + " " * 20 + "".join(f"{p[:14]:>15}" for p in procs))
for key in ("sequential-plain", "sequential-opt-in", "concurrent-plain", "concurrent-opt-in"):
    print(f"  {key:<20}" + "".join(f"{cpu[key][p]:>15.3f}" for p in procs))
print()
print(f"apiserver_admission_webhook_admission_duration_seconds{{name=\"{WEBHOOK}\",operation=\"CREATE\",type=\"admit\"}}")
print("  (the API server's time calling the webhook; buckets 5, 25, 100 ms ...: a p99 below 5 ms reads only as <= 5 ms)")
for phase in ("sequential", "concurrent"):
    h = report["apiserver_webhook"][phase]["admission_duration"]
    print(f"  {phase:>10}: {h['count']} calls, p99 <= {h['p99_le_ms']} ms, mean {f(h['mean_ms'])} ms, buckets {h['buckets']}")
print(f"  apiserver_admission_webhook_request_total: {hook_all['request_total']}")
print(f"  apiserver_admission_webhook_rejection_count: {hook_all['rejection_count'] or 'none'}; fail_open_count: {hook_all['fail_open_count'] or 'none'}")
print("podshaper_http_request_duration_seconds{path=\"/mutate-v1-pod\"} (the webhook's own time, buckets 0.5, 1, 2.5, 5 ms ...)")
for phase in ("sequential", "concurrent"):
    h = report["webhook_server"][phase]
    print(f"  {phase:>10}: {h['count']} requests, p50 <= {h['p50_le_ms']} ms, p99 <= {h['p99_le_ms']} ms, mean {f(h['mean_ms'])} ms")
print()
v = report["verdict"]
print(f"added sequential p99 by round: {added['p99_by_round']} ms; p50 by round: {added['p50_by_round']} ms")
print(f"added sequential p99: {added['p99']:+.3f} ms (bootstrap 95%: {added['p99_bootstrap_95'][0]:+.3f} .. {added['p99_bootstrap_95'][1]:+.3f}),"
      f" p50 {added['p50']:+.3f}, mean {added['mean']:+.3f}; errors {errors}"
      f" -> {'PASS' if v['pass'] else 'FAIL'}: webhook adds <= 2 ms p99")
if json_out:
    with open(json_out, "w") as fh:
        json.dump(report, fh, indent=1)
    print(f"(JSON: {json_out})")
PY
