#!/usr/bin/env bash
# make review-demo: shape a sample 8-GPU ResNet-50 training pod offline with
# `podshaper-webhook review` and show, for a person, what changed and why.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PODSHAPER_BIN:-build/bin}/podshaper-webhook
review=examples/admissionreview-resnet50.json
config=examples/webhook-config.yaml

echo "== podshaper demo: the webhook shapes a training pod (offline dry run) =="
echo "input:  $review  (pod resnet-0 in namespace ml, 8 × nvidia.com/gpu, 100Gi memory)"
echo "config: $config"
echo "command: $bin review --config $config --output pod < $review"
echo
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" review --config "$config" --output pod < "$review" > "$tmp/shaped.json" 2> "$tmp/warnings"
python3 - "$review" "$tmp/shaped.json" <<'PY' 
import json, re, sys
before = json.load(open(sys.argv[1]))["request"]["object"]
after = json.load(open(sys.argv[2]))
a = after["metadata"]["annotations"]
print("annotations the user wrote:")
for k in sorted(before["metadata"]["annotations"]):
    print(f"  {k}: {before['metadata']['annotations'][k]}")
print()
print(f"/dev/shm size:   {a['podshaper.io/shm-size']}   (emptyDir medium: Memory, volume podshaper-dshm)")
print("formula:         " + a["podshaper.io/shm-formula"].replace("; ", "\n                 "))
for b, c in zip(before["spec"]["containers"], after["spec"]["containers"]):
    lim_b = b.get("resources", {}).get("limits", {}).get("memory", "none")
    lim_a = c.get("resources", {}).get("limits", {}).get("memory", "none")
    caps = c.get("securityContext", {}).get("capabilities", {}).get("add", [])
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    print(f"container {c['name']}:")
    print(f"  memory limit:  {lim_b} -> {lim_a}  (pays for its share of /dev/shm)")
    print(f"  capabilities:  add {caps}")
    print(f"  mounts:        {[m['mountPath'] for m in c.get('volumeMounts', [])]}")
    print(f"  PET_NPROC_PER_NODE={env.get('PET_NPROC_PER_NODE')}")
    key = f"ulimits.noderesource.dev/container.{c['name']}"
    soft = re.search(r"soft: (\d+)", a.get(key, ""))
    memlock = "unlimited" if soft and soft[1] == "18446744073709551615" else (soft[1] + " bytes" if soft else "runtime default")
    print(f"  memlock:       NRI annotation {key} = RLIMIT_MEMLOCK {memlock}")
print(f"hostIPC:         {after['spec'].get('hostIPC', False)}")
aff = after["spec"].get("affinity", {})
terms = aff.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
for t in terms:
    print("node affinity:   " + ", ".join(f"{e['key']}{'=' if e['operator'] == 'In' else ' > '}{e['values'][0]}"
                                         for e in t.get("matchExpressions", [])))
for t in aff.get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
    print(f"pod anti-affinity: one podshaper.io/placement=node-exclusive pod per {t['topologyKey']}")
print(f"shaped-by:       {a['podshaper.io/shaped-by']}")
PY
echo
echo "warnings the API server would pass to kubectl:"
sed 's/^/  /' "$tmp/warnings"
echo
echo "a bad annotation is a denial that says what to change:"
# (exit 1: a denial, as kubectl exits)
{ sed 's/"float32"/"fp8"/' "$review" | "$bin" review --output pod 2>&1 >/dev/null || true; } | grep '^Error' | sed 's/^/  /'
echo
echo "your own manifests (a Job, a JobSet, any workload; exit 1 on a denial, for CI):"
echo "  $bin review -f examples/training-job.yaml > shaped.yaml"
"$bin" review --config "$config" -f examples/training-job.yaml 2>&1 >/dev/null | sed 's/^/  /' | cut -c1-160 || true
echo
echo "The full AdmissionReview response (JSON Patch): $bin review --config $config < $review"
