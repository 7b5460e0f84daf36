#!/usr/bin/env bash
# End-to-end on the real node, podshaper installed there as pods (scripts/cluster.sh install),
# podshaper-shm among them: shaped pods' /dev/shm measured from the node and told in their
# metrics, Events and ShmUsage objects; a pod warned before it fills; a restarted container
# that finds /dev/shm cleared of its dead run's files but for the one a sidecar holds; a run's
# peak kept across a restart of podshaper-shm; what podshaper-shm may not do; and Jobs whose
# next pods are sized from what their earlier runs used (ShmProfiles).
source "$(dirname "$0")/../cli/lib.sh"
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
export PODSHAPER_CLUSTER_DIR=${PODSHAPER_CLUSTER_DIR:-$root/build/e2e-shm-cluster}
export PODSHAPER_WITH_NODE=yes
dir=$PODSHAPER_CLUSTER_DIR
kubeconfig=$dir/kubeconfig
logs=$dir/logs
node=real-h200x4-0
tmp=$(mktemp -d)
trap 'node_test_cleanup $?' EXIT
kc() { kubectl --kubeconfig "$kubeconfig" "$@"; }
mi=$((1024 * 1024))
matches() { grep -qE -- "$2" <<<"$1"; }

bash "$root/scripts/cluster.sh" down-all
t0=$SECONDS
PODSHAPER_WITH_WEBHOOK=no PODSHAPER_WITH_CRDS=no bash "$root/scripts/cluster.sh" up
bash "$root/scripts/cluster.sh" install
echo "cluster, real node and podshaper up in $((SECONDS - t0)) s"

check "the operator validates the real node" \
  eventually 120 'true' kc get node "$node" -o jsonpath='{.metadata.labels.podshaper\.io/topology-validated}'
check "podshaper-shm runs on the node, synchronized with its containerd (NRI)" \
  eventually 60 'true' kc -n podshaper-node get pods -l app.kubernetes.io/name=podshaper-shm -o jsonpath='{.items[0].status.containerStatuses[0].ready}'
shm_pod() { kc -n podshaper-node get pods -l app.kubernetes.io/name=podshaper-shm -o jsonpath='{.items[0].metadata.name}'; }
shm_ip() { kc -n podshaper-node get pods -l app.kubernetes.io/name=podshaper-shm -o jsonpath='{.items[0].status.podIP}'; }
# metric NAME POD: the sample's value as podshaper-shm wrote it (bytes, not %g)
metric() {
  curl -s --max-time 3 "http://$(shm_ip):8080/metrics" |
    awk -v k="$1{namespace=\"ml\",pod=\"$2\"}" '$1 == k {print $2; found = 1} END {exit !found}'
}

# --- what the privileged part may not do on its node (its API rights: e2e_install)
pid=$(pgrep -f '^/usr/local/bin/podshaper-shm' | head -1)
check "podshaper-shm's process is found on the node" test -n "$pid"
# CapEff: CAP_DAC_OVERRIDE (1) and CAP_SYS_PTRACE (19), nothing else.
check "podshaper-shm runs with CAP_DAC_OVERRIDE and CAP_SYS_PTRACE only" \
  eventually 5 '0000000000080002' awk '/^CapEff/ {print $2}' "/proc/$pid/status"
check "podshaper-shm cannot gain privileges (no_new_privs)" eventually 5 1 awk '/^NoNewPrivs/ {print $2}' "/proc/$pid/status"
check "podshaper-shm's root file system is read-only" \
  eventually 5 ro awk '$5 == "/" {split($6, o, ","); print o[1]; exit}' "/proc/$pid/mountinfo"

# --- the pods (examples/real-node/shm-watch.yaml)
examples=$root/examples/real-node
kc create namespace ml >/dev/null && kc label namespace ml pod-security.kubernetes.io/enforce=privileged >/dev/null
until_ok 30 kc -n ml get serviceaccount default || fail "namespace ml: no default service account"
kc -n ml create configmap podshaper-examples --from-file "$examples/shm_peak.py" --from-file "$examples/dataloader.py" >/dev/null
kc apply -f "$examples/shm-watch.yaml" >/dev/null
phase() { kc -n ml get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
events() { kc -n ml get events --field-selector "involvedObject.name=$1,reason=$2" -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null; }
size_of() { kc -n ml get shmusage "$1" -o jsonpath='{.status.sizeBytes}'; }
# within A B PERCENT: A is within PERCENT% of B
within() { python3 -c 'import sys; a, b, p = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= b * p / 100 else 1)' "$@"; }
# peak_in MESSAGE: the peak a ShmUsage Event says, in bytes ("peak 48Mi of ...")
peak_in() { python3 -c '
import re, sys
m = re.search(r"peak (\d+)(Ki|Mi|Gi)? of", sys.argv[1])
print(int(m.group(1)) * {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}[m.group(2)] if m else -1)' "$1"; }

# 1. a pod holding 48 MiB: its use in the metrics while it runs, its peak when it ends
check "shm-steady runs" eventually 90 Running phase shm-steady
at_least() { local v; v=$(metric "$1" "$2") && [[ $v -ge $3 ]]; }
check "podshaper_pod_shm_used_bytes of shm-steady reaches 48 MiB" until_ok 30 at_least podshaper_pod_shm_used_bytes shm-steady $((47 * mi))
used=$(metric podshaper_pod_shm_used_bytes shm-steady)
check "... within 5% of 48 MiB ($used bytes)" within "$used" $((48 * mi)) 5
size=$(metric podshaper_pod_shm_size_bytes shm-steady)
check "podshaper_pod_shm_size_bytes of shm-steady is its /dev/shm, 161Mi ($size bytes)" test "$size" = $((161 * mi))
check "shm-steady has a ShmUsage object in its namespace, run 1 open" \
  eventually 30 '1 podshaper-dshm' kc -n ml get shmusage shm-steady -o jsonpath='{.status.runCount} {.spec.volume}'

# 2. a pod that fills 95%: warned while it still runs
told() { [[ -n $(events "$1" "$2") ]]; }
ended() { [[ $(phase "$1") == Succeeded ]]; }
check "shm-fill gets a ShmNearlyFull Warning" until_ok 90 told shm-fill ShmNearlyFull
check "... while shm-fill still runs" eventually 2 Running phase shm-fill
nearly=$(events shm-fill ShmNearlyFull)
echo "  ShmNearlyFull: $nearly"
check "... saying how full, what fills it and what to raise" \
  matches "$nearly" '/dev/shm is 9[0-9]% full in run 1: .* used\. It holds .*podshaper\.io/' 
check "... once" test "$(events shm-fill ShmNearlyFull | grep -c .)" = 1

# 3. shm-steady's end: its ShmUsage Event
check "shm-steady ends" until_ok 90 ended shm-steady
check "shm-steady gets a ShmUsage Event when its run ends" until_ok 20 told shm-steady ShmUsage
usage=$(events shm-steady ShmUsage)
echo "  ShmUsage: $usage"
check "... its peak within 5% of the 48 MiB written" within "$(peak_in "$usage")" $((48 * mi)) 5
check "... against the size, with the advice" matches "$usage" 'of 161Mi \([0-9]+%\) in run 1 \(Completed\): /dev/shm could be [0-9]+Mi' 

# 4. a real DataLoader: the peak measured from the node against the container's own statfs loop
check "shm-dataloader finishes" until_ok 240 ended shm-dataloader
inside=$(kc -n ml logs shm-dataloader | sed -n 's/.*statfs_peak_bytes=\([0-9]*\).*/\1/p')
run_ended() { [[ -n $(kc -n ml get shmusage "$1" -o jsonpath='{.status.runs[0].endedAt}') ]]; }
check "shm-dataloader's ShmUsage says its run ended" until_ok 20 run_ended shm-dataloader
measured=$(kc -n ml get shmusage shm-dataloader -o jsonpath='{.status.runs[0].peakBytes}')
echo "  DataLoader: the container's statfs loop saw $inside bytes at most; podshaper-shm measured $measured"
check "the DataLoader's measured peak is within 10% of the container's own ($measured vs $inside)" within "${measured:-0}" "${inside:-1}" 10

# 5. a container restarted after leaving NCCL's and torch's segments: a clean /dev/shm
check "shm-restart finishes" until_ok 180 ended shm-restart
check "... after one restart" eventually 5 1 kc -n ml get pod shm-restart -o jsonpath='{.status.containerStatuses[0].restartCount}'
kc -n ml logs shm-restart -c trainer >"$tmp/second.log"
kc -n ml logs shm-restart -c trainer --previous >"$tmp/first.log" 2>/dev/null || true
cat "$tmp/second.log"
second_used=$(sed -n 's/^used_kib=//p' "$tmp/second.log")
check "its second run found /dev/shm empty at its first instruction (${second_used} KiB used < 1 MiB)" \
  test "${second_used:-99999}" -lt 1024
check "... but for the file its native sidecar holds open" grep -q 'files=held-by-sidecar $' "$tmp/second.log"
removed=$(events shm-restart ShmLeftoversRemoved)
echo "  ShmLeftoversRemoved: $removed"
check "a ShmLeftoversRemoved Event says what was removed: 4 files, 104Mi, by kind" \
  matches "$removed" 'removed 4 files \(104Mi\).*NCCL segments: 3 files, 96Mi'
check "... and what the sidecar still holds" contains "$removed" 'Kept 1 file' 
# At most three a run: shm-restart's two runs (a removal, two ShmUsage), the others' one each.
shm_events() { kc -n ml get events -o jsonpath='{range .items[?(@.source.component=="podshaper-shm")]}{.involvedObject.name} {.reason}{"\n"}{end}' | sort | uniq -c | awk '{printf "%s:%s=%s ", $2, $3, $1}'; }
check "podshaper-shm told each pod each Event once a run" eventually 5 \
  'shm-dataloader:ShmUsage=1 shm-fill:ShmNearlyFull=1 shm-fill:ShmUsage=1 shm-restart:ShmLeftoversRemoved=1 shm-restart:ShmUsage=2 shm-steady:ShmUsage=1 ' shm_events

# 6. podshaper-shm restarted mid-run: the run's peak is not lost
busybox_shaped_pod shm-survives shm-watch \
  'dd if=/dev/zero of=/dev/shm/data bs=1M count=64 2>/dev/null; sleep 75; rm /dev/shm/data; sleep 5' | kc apply -f - >/dev/null
kept_peak() { local v; v=$(kc -n ml get shmusage "$1" -o jsonpath='{.status.peakBytes}') && [[ ${v:-0} -ge $2 ]]; }
check "shm-survives' peak of 64 MiB reaches its ShmUsage object (at most one routine write per 30 s)" \
  until_ok 60 kept_peak shm-survives $((63 * mi))
old=$(shm_pod)
kc -n podshaper-node delete pod "$old" --wait=true >/dev/null
new_ready() { local p; p=$(kc -n podshaper-node get pods -l app.kubernetes.io/name=podshaper-shm -o jsonpath='{.items[0].metadata.name} {.items[0].status.containerStatuses[0].ready}'); [[ $p != "$old "* && $p == *true ]]; }
check "a new podshaper-shm pod is ready" until_ok 60 new_ready
check "shm-survives ends" until_ok 120 ended shm-survives
check "shm-survives gets its ShmUsage Event" until_ok 20 told shm-survives ShmUsage
survived=$(events shm-survives ShmUsage)
echo "  ShmUsage after podshaper-shm's restart: $survived"
check "... with the 64 MiB peak measured before the restart" within "$(peak_in "$survived")" $((64 * mi)) 5
check "kubectl describe pod shm-survives shows it" matches "$(kc -n ml describe pod shm-survives)" 'ShmUsage .*peak 6[45]Mi of 161Mi' 

# 7. the series of a pod go with it
kc -n ml delete pod shm-steady --wait=true >/dev/null
no_series() { ! curl -s "http://$(shm_ip):8080/metrics" | grep -q "pod=\"$1\""; }
gone() { ! kc -n ml get shmusage "$1" >/dev/null 2>&1; }
check "shm-steady's series are gone from the metrics once it is deleted" until_ok 30 no_series shm-steady
check "its ShmUsage object goes with it (owned by the pod)" until_ok 60 gone shm-steady
# 8. its ValidatingAdmissionPolicy, with its own pod's token (which names the node): it
# may write its node's pods' ShmUsages, not another node's
server=$(kc config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
ca=$(kc config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
if [[ -z $ca ]]; then
  ca=$tmp/ca.crt
  kc config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$ca"
fi
token=$(kc -n podshaper-node create token podshaper-shm --bound-object-kind Pod --bound-object-name "$(shm_pod)")
as_shm() { kubectl --kubeconfig /dev/null --server "$server" --certificate-authority "$ca" --token "$token" "$@"; }
usage_of() { # NAME NODE [OWNER-UID]: a ShmUsage of a pod of NODE, owned by the pod of OWNER-UID (its own)
  printf '{"apiVersion": "podshaper.io/v1alpha1", "kind": "ShmUsage", "metadata": {"name": "%s", "namespace": "ml",
    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "%s", "uid": "%s"}]},
    "spec": {"podName": "%s", "podUID": "u-%s", "nodeName": "%s", "volume": "podshaper-dshm", "userVolume": false}}' \
    "$1" "$1" "${3:-u-$1}" "$1" "$1" "$2"
}
create_own() { usage_of own-node "$node" | as_shm create -f - >/dev/null; }
check "podshaper-shm's token may create a ShmUsage of its node's pod" create_own
if out=$(usage_of other-node gpu-7 | as_shm create -f - 2>&1); then
  fail "podshaper-shm's token created a ShmUsage of another node's pod"
else
  check "... not one of another node's pod, and the API server says why" contains "$out" "podshaper-shm may write only the ShmUsages of its own node's pods ($node), not ml/other-node of node gpu-7"
fi
if out=$(usage_of not-owned "$node" u-someone-else | as_shm create -f - 2>&1); then
  fail "podshaper-shm's token created a ShmUsage owned by another pod than the one it names"
else
  check "... nor one owned by another pod than the one it names" contains "$out" "a ShmUsage is owned by the pod it measures"
fi
kc -n ml delete shmusage own-node --ignore-not-found >/dev/null

# 9. The next run sized from what the last runs used (examples/real-node/shm-profile.yaml):
#    a Job that declares 4× what it writes, created again, and one that declares far too
#    little, retried by its Job until a pod completes; neither changed by its user.
job_done() { [[ $(kc -n ml get job "$1" -o jsonpath='{.status.succeeded}' 2>/dev/null) == 1 ]]; }
# job_pods JOB: "SHM-SIZE EXIT-CODE" of each of its pods, oldest first
job_pods() {
  kc -n ml get pods -l job-name="$1" --sort-by=.metadata.creationTimestamp \
    -o jsonpath='{range .items[*]}{.metadata.annotations.podshaper\.io/shm-size} {.status.containerStatuses[0].state.terminated.exitCode}{"\n"}{end}'
}
bytes_of() { python3 -c '
import sys
t = sys.argv[1]
for s, m in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
    if t.endswith(s): print(int(t[:-2]) * m); break
else: print(int(t))' "$1"; }
profile_runs() { kc -n ml get shmprofile "$1" -o jsonpath='{.status.runCount}' 2>/dev/null; }
kc apply -f "$examples/shm-profile.yaml" >/dev/null
check "shm-oversized completes" until_ok 120 job_done shm-oversized
check "... its pod sized by the formula: 794Mi" eventually 5 '794Mi 0' job_pods shm-oversized
check "its run reaches ShmProfile job.shm-oversized, which no Job owns" eventually 60 1 profile_runs job.shm-oversized
peak=$(kc -n ml get shmprofile job.shm-oversized -o jsonpath='{.status.runs[0].peakBytes}')
check "... with the peak podshaper-shm measured, about 200 MiB ($peak bytes)" within "$peak" $((200 * mi)) 3
kc -n ml delete job shm-oversized --cascade=foreground --wait >/dev/null
check "the Job and its pod are deleted" eventually 60 '' job_pods shm-oversized
check "... the profile is not" eventually 5 1 profile_runs job.shm-oversized
kc apply -f "$examples/shm-profile.yaml" >/dev/null
check "shm-oversized, created again under the same name, completes" until_ok 120 job_done shm-oversized
second=$(job_pods shm-oversized | awk '{print $1}')
check "... its pod's /dev/shm ($second) is between the first run's peak and 1.25× of it" \
  python3 -c 'import sys; s, p = map(int, sys.argv[1:]); sys.exit(0 if p <= s <= p * 1.25 else 1)' "$(bytes_of "$second")" "$peak"
formula=$(kc -n ml get pods -l job-name=shm-oversized -o jsonpath='{.items[0].metadata.annotations.podshaper\.io/shm-formula}')
check "... and its shm-formula says why" matches "$formula" "^measured: peak 2[0-9][0-9]Mi per rank over 1 run, the last [0-9]+ (s|min) ago, \\+ 20% = $second \\(ShmProfile \"job.shm-oversized\"\\); the formula gives 794Mi"
check "shm-undersized completes by itself" until_ok 240 job_done shm-undersized
sizes=$(job_pods shm-undersized | tr '\n' ';')
check "... its first pod died of SIGBUS with the formula's 64Mi, each retry had twice what the last died with + 20%, until one completed" \
  test "$sizes" = '64Mi 135;154Mi 135;370Mi 0;'
first_pod=$(kc -n ml get pods -l job-name=shm-undersized --sort-by=.metadata.creationTimestamp -o jsonpath='{.items[0].metadata.name}')
check "... and kubectl describe pod says it died of a full /dev/shm" matches "$(kc -n ml describe pod "$first_pod")" 'ShmExhausted'
both_profiled() {  # (grep reads line by line: one pattern a line)
  profiles=$(kc -n ml get shmprofiles) &&
    matches "$profiles" '^NAME +WORKLOAD +RUNS +PEAK +LAST SIZE +RECOMMENDED +AGE' &&
    matches "$profiles" '^job\.shm-oversized +Job shm-oversized +2 +2[0-9]{2}Mi +2[0-9]{2}Mi +2[0-9]{2}Mi ' &&
    matches "$profiles" '^job\.shm-undersized +Job shm-undersized +3 +2[0-9]{2}Mi +370Mi +2[0-9]{2}Mi '
}
check "kubectl get shmprofiles shows both Jobs' profiles, every run in them" until_ok 60 both_profiled
echo "$profiles" | sed 's/^/  /'
check "kubectl describe shmprofile lists each run and how it ended" \
  matches "$(kc -n ml describe shmprofile job.shm-undersized)" 'End: +ShmExhausted'

writes=$(metric_at "http://$(shm_ip):8080/metrics" podshaper_shm_api_writes_total 'kind="failed"')
check "no API write of podshaper-shm failed ($writes)" test "$writes" = 0

finish
