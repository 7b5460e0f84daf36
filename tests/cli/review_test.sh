#!/usr/bin/env bash
# `podshaper-webhook review`: an AdmissionReview on stdin, the response on stdout.
source "$(dirname "$0")/lib.sh"
bin=$1; root=$2
cases=$root/tests/golden/cases
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$("$bin" review < "$cases/seed-no-cluster-nccl-reserve/review.json"); rc=$?
check "review exits 0 for a shaped pod" test $rc -eq 0
check "response is an AdmissionReview with a JSON patch" \
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])["response"]; assert r["allowed"] and r["patchType"]=="JSONPatch" and r["patch"]' "$out"

pod=$("$bin" review --output pod < "$cases/seed-no-cluster-nccl-reserve/review.json" 2>"$tmp/err")
check "--output pod prints the shaped pod" contains "$pod" '"podshaper.io/shm-size": "8231Mi"'
check "--output pod prints warnings like kubectl" contains "$(cat "$tmp/err")" "Warning: podshaper: podshaper.io/ranks-per-pod not set"

printf 'defaults:\n  ncclCommunicators: 0\n' > "$tmp/config.yaml"
pod=$("$bin" review --config "$tmp/config.yaml" --output pod < "$cases/seed-no-cluster-nccl-reserve/review.json" 2>/dev/null)
check "the seed example with no reserve is 6008Mi" contains "$pod" '"podshaper.io/shm-size": "6008Mi"'

out=$("$bin" review < "$cases/denied-unknown-dtype/review.json"); rc=$?
check "a denial still exits 0 with the AdmissionReview out (the response is the result)" test $rc -eq 0
check "a denial says allowed false and why" \
  python3 -c 'import json,sys; r=json.loads(sys.argv[1])["response"]; assert not r["allowed"] and "unknown dtype" in r["status"]["message"]' "$out"

python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(json.dumps({"apiVersion":"v1","kind":"List","items":c["namespaces"]+c["nodes"]}))' \
  "$cases/seed-8xh100-validated-p2p/cluster.json" > "$tmp/cluster.json"
pod=$("$bin" review --cluster "$tmp/cluster.json" --output pod < "$cases/seed-8xh100-validated-p2p/review.json" 2>/dev/null)
check "--cluster decides as serve would on that cluster (validated P2P, torchrun --nnodes=2: NET, 7053Mi)" contains "$pod" '"podshaper.io/shm-size": "7053Mi"'
# Pods asking GPUs through DRA: --cluster also takes the ResourceClaimTemplates and ResourceClaims.
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(json.dumps({"apiVersion":"v1","kind":"List","items":c["namespaces"]+c["nodes"]+c["resourceClaims"]}))' \
  "$cases/dra-template-8-gpus/cluster.json" > "$tmp/dra-cluster.json"
pod=$("$bin" review --cluster "$tmp/dra-cluster.json" --output pod < "$cases/dra-template-8-gpus/review.json" 2>/dev/null)
check "--cluster reads the templates a DRA pod names (8 GPUs: 7053Mi)" contains "$pod" '"podshaper.io/shm-size": "7053Mi"'
set +e; "$bin" review --cluster "$tmp/cluster.json" --output pod < "$cases/dra-template-8-gpus/review.json" >/dev/null 2>"$tmp/err"; set -e
check "a DRA pod whose template --cluster lacks is denied, naming it" \
  contains "$(cat "$tmp/err")" 'Error: denied: podshaper: ResourceClaimTemplate "eight-h100" (spec.resourceClaims["gpus"]) was not found'
"$bin" review --output pod < "$cases/dra-template-8-gpus/review.json" >/dev/null 2>"$tmp/err"
check "without --cluster its claims are not read, and it says so" contains "$(cat "$tmp/err")" 'resource claims were not read'
echo '{"kind":"Pod"}' > "$tmp/notalist.json"
set +e; "$bin" review --cluster "$tmp/notalist.json" < "$cases/seed-8xh100-validated-p2p/review.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a --cluster file that is not a List exits 2" test $rc -eq 2
check "saying what it expected" contains "$(cat "$tmp/err")" "expected a List"

set +e; "$bin" review --output pod < "$cases/denied-unknown-dtype/review.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "--output pod exits 1 on a denial, as kubectl does" test $rc -eq 1
check "... saying why on stderr" contains "$(cat "$tmp/err")" "Error: denied: podshaper: annotation podshaper.io/batch-dtype"

# -f: the user's own YAML, a Pod or any workload with pod templates.
cat > "$tmp/workloads.yaml" <<'YAML'
# A Job of two 8-GPU workers, opted in on its pod template
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  completions: 2
  template:
    metadata:
      labels: {podshaper.io/inject: "true"}
      annotations: {podshaper.io/dataloader-workers: "8", podshaper.io/batch-bytes: 18Mi}
    spec:
      restartPolicy: Never
      containers:
      - name: trainer
        image: pytorch:2
        command: [torchrun, --standalone, --nproc-per-node=8, train.py]
        resources:
          limits: {nvidia.com/gpu: 8, memory: 100Gi}
---
# Labelled on the Deployment, not on its template: the API server never sends its pods
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, labels: {podshaper.io/inject: "true"}}
spec:
  replicas: 1
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      containers:
      - {name: server, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
YAML
"$bin" review -f "$tmp/workloads.yaml" >"$tmp/out.yaml" 2>"$tmp/err"; rc=$?
check "-f: every pod admitted exits 0" test $rc -eq 0
check "-f: YAML in, YAML out, the Job's template shaped" python3 - "$tmp/out.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
docs = text.split("\n---\n")
assert len(docs) == 2, text
job = docs[0]
assert "kind: Job" in job and "podshaper.io/shm-size:" in job and "medium: Memory" in job, job
assert "podshaper.io/shaped: \"true\"" in job, job        # a string that reads as a boolean stays quoted
assert "completions: 2" in job, job                          # the Job's own fields as written
assert "podshaper.io/shm-size" not in docs[1], docs[1]       # not opted in: left as written
PY
check "-f: the template not labelled is named, and why it is left" \
  contains "$(cat "$tmp/err")" 'Note: Deployment default/serve spec.template: not labelled podshaper.io/inject: "true", so the API server does not call podshaper for the pods made from it; left as written'
check "-f: warnings name the object and the template" contains "$(cat "$tmp/err")" "Warning: Job ml/train spec.template: "
"$bin" review -f - --output json <"$tmp/workloads.yaml" >"$tmp/out.json" 2>/dev/null
check "-f -: stdin, and --output json prints a List" \
  python3 -c 'import json,sys; l=json.load(open(sys.argv[1])); assert l["kind"]=="List" and len(l["items"])==2 and "podshaper.io/shm-size" in l["items"][0]["spec"]["template"]["metadata"]["annotations"]' "$tmp/out.json"
"$bin" review -f "$tmp/out.yaml" >"$tmp/again.yaml" 2>/dev/null
check "-f: its own output reads back, and an already shaped template is left as it is" cmp -s "$tmp/out.yaml" "$tmp/again.yaml"
"$bin" review -f "$root/examples/training-job.yaml" >/dev/null 2>"$tmp/err"; rc=$?
check "-f: the example job's two pods are admitted" test $rc -eq 0

sed 's/podshaper.io\/batch-bytes: 18Mi/podshaper.io\/batch-bytes: 18Qi/' "$tmp/workloads.yaml" > "$tmp/denied.yaml"
set +e; "$bin" review -f "$tmp/denied.yaml" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-f: a denial exits 1 (a CI gate)" test $rc -eq 1
check "-f: ... naming the object, the template and the annotation" \
  contains "$(cat "$tmp/err")" "Error: Job ml/train spec.template: denied: podshaper: annotation podshaper.io/batch-bytes"
printf 'kind: Pod\nmetadata: {name: [\n' > "$tmp/broken.yaml"
set +e; "$bin" review -f "$tmp/broken.yaml" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
check "-f: YAML that does not parse exits 2" test $rc -eq 2
check "... naming the file and the line, on one line" \
  test "$(grep -c "$tmp/broken.yaml: line .*not valid YAML" "$tmp/err") $(wc -l < "$tmp/err")" = "1 1"
check "... and nothing on stdout" test ! -s "$tmp/out"
set +e; "$bin" review -f "$tmp/none.yaml" 2>"$tmp/err"; rc=$?; set -e
check "-f: a missing file exits 2, naming it" test "$rc $(grep -c "none.yaml" "$tmp/err")" = "2 1"
set +e; "$bin" review -f - < "$cases/seed-no-cluster-nccl-reserve/review.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-f with an AdmissionReview exits 2, saying where it goes" test "$rc $(grep -c "without -f" "$tmp/err")" = "2 1"
set +e; "$bin" review -n ml < "$cases/seed-no-cluster-nccl-reserve/review.json" >/dev/null 2>&1; rc=$?; set -e
check "-n without -f exits 2" test $rc -eq 2
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n' > "$tmp/cm.yaml"
"$bin" review -f "$tmp/cm.yaml" >/dev/null 2>"$tmp/err"
check "-f: a file with no pod says so" contains "$(cat "$tmp/err")" "no pod or pod template found"

# kubectl's habits: --help and -h on every command, -o, -f DIR, -f more than once.
for cmd in "review --help" "review -h" "serve --help" "check -h" "review -f x.yaml --help"; do
  set +e; "$bin" $cmd >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
  check "$cmd: usage on stdout, exit 0" test "$rc $(grep -c '^usage:' "$tmp/out") $(wc -c < "$tmp/err")" = "0 1 0"
done
mkdir -p "$tmp/dir"
cp "$tmp/workloads.yaml" "$tmp/dir/a.yaml"; cp "$tmp/cm.yaml" "$tmp/dir/b.yml"; echo 'not read' > "$tmp/dir/notes.txt"
"$bin" review -f "$tmp/dir" -o json >"$tmp/out.json" 2>/dev/null; rc=$?
check "-f DIR: every .yaml, .yml and .json in it, in name order (-o json)" \
  python3 -c 'import json,sys; l=json.load(open(sys.argv[1])); assert [i["kind"] for i in l["items"]]==["Job","Deployment","ConfigMap"], l' "$tmp/out.json"
mkdir -p "$tmp/empty"
set +e; "$bin" review -f "$tmp/empty" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-f DIR with no manifest exits 2, saying so" test "$rc $(grep -c 'no .yaml, .yml or .json file' "$tmp/err")" = "2 1"
"$bin" review -f "$tmp/cm.yaml" >"$tmp/out" 2>/dev/null
check "an object podshaper leaves alone is printed as read" cmp -s "$tmp/cm.yaml" "$tmp/out"
"$bin" review -f "$tmp/workloads.yaml" -o diff >"$tmp/out" 2>/dev/null; rc=$?
check "-o diff: a unified diff of what podshaper changes, exit 0" test $rc -eq 0
check "-o diff: its header names the file (a tab after the name, as diff -u writes it)" \
  test "$(head -n 2 "$tmp/out")" = "--- $tmp/workloads.yaml"$'\t'"(as written)
+++ $tmp/workloads.yaml"$'\t'"(shaped by podshaper)"
check "-o diff: it applies to the input" bash -c "cp '$tmp/workloads.yaml' '$tmp/patched.yaml' && patch -s '$tmp/patched.yaml' < '$tmp/out' && '$bin' review -f '$tmp/workloads.yaml' 2>/dev/null | cmp -s - '$tmp/patched.yaml'"
set +e; "$bin" review -f "$tmp/cm.yaml" -o wide >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-o of another kind exits 2" test "$rc $(grep -c 'yaml, json or diff' "$tmp/err")" = "2 1"

# An in-cluster decision and an offline one on the same objects are the same: the pod as an
# AdmissionReview with --cluster, and the pod's manifest with the cluster's objects in -f.
python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["request"]["object"]))' \
  "$cases/dra-template-8-gpus/review.json" > "$tmp/dra-pod.json"
"$bin" review --cluster "$tmp/dra-cluster.json" --output pod < "$cases/dra-template-8-gpus/review.json" > "$tmp/in-cluster.json" 2>"$tmp/in-cluster.err"
"$bin" review -f "$tmp/dra-pod.json" -f "$tmp/dra-cluster.json" -o json > "$tmp/offline.json" 2>"$tmp/offline.err"; rc=$?
check "-f with the pod, its template and the nodes in one input: admitted" test $rc -eq 0
check "... shaped exactly as the AdmissionReview with --cluster is" python3 -c '
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))["items"][0]
assert a == b, (a, b)' "$tmp/in-cluster.json" "$tmp/offline.json"
check "... with the same warnings" python3 -c '
import sys
a = [l.split(": ", 1)[1] for l in open(sys.argv[1]) if l.startswith("Warning: ")]
b = [l.split(": ", 2)[2] for l in open(sys.argv[2]) if l.startswith("Warning: ")]
assert a and a == b, (a, b)' "$tmp/in-cluster.err" "$tmp/offline.err"
set +e; "$bin" review -f "$tmp/dra-pod.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-f with a DRA pod whose template is not in the input: denied, as the webhook would" test $rc -eq 1
check "... saying to pass it" contains "$(cat "$tmp/err")" "review reads ResourceClaimTemplates and ResourceClaims (and a ComputeDomain, as the channel template its driver makes) from -f's input and --cluster: pass it there"
cat > "$tmp/one-gpu.yaml" <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: small, labels: {podshaper.io/inject: "true"}, annotations: {podshaper.io/batch-bytes: 8Mi}}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
YAML
set +e; "$bin" review -f "$tmp/one-gpu.yaml" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-f without Nodes: a 1-GPU pod is denied for config's 8-GPU nodes" test $rc -eq 1
check "... saying where the size came from and how to give the real nodes" \
  contains "$(cat "$tmp/err")" "review was given no Node, so the node size came from its config: pass the cluster's Nodes with --cluster"
check "... and the pod's GPU in the singular" contains "$(cat "$tmp/err")" "the pod asks 1 nvidia.com/gpu "

# What a review -f prints must read as it did for kubectl (YAML 1.1) and keep the file as written.
cat > "$tmp/yaml11.yaml" <<'YAML'
# header comment
apiVersion: v1
kind: Pod
metadata:
  name: yaml11
  labels: {podshaper.io/inject: "true", enabled: "yes", legacy: "on"}
  annotations: {podshaper.io/batch-bytes: 8Mi, mode: "0777", count: "1_000", when: "2024-01-01"}
spec:
  containers:
  - name: c
    image: x
    env: [{name: DEBUG, value: "no"}, {name: RATIO, value: "60:30"}]
    resources:
      limits: {nvidia.com/gpu: 8}
      requests: &req {cpu: "2", memory: 1Gi}
  - name: sidecar
    image: y
    resources:
      requests:
        <<: *req
        cpu: "1"
YAML
"$bin" review -f "$tmp/yaml11.yaml" > "$tmp/out.yaml" 2>/dev/null
check "strings YAML 1.1 reads as booleans, numbers or times stay quoted" python3 -c '
import sys, yaml  # PyYAML reads YAML 1.1, as kubectl does
p = yaml.safe_load(open(sys.argv[1]))
assert p["metadata"]["labels"]["enabled"] == "yes" and p["metadata"]["labels"]["legacy"] == "on", p["metadata"]["labels"]
a = p["metadata"]["annotations"]
assert a["mode"] == "0777" and a["count"] == "1_000" and a["when"] == "2024-01-01", a
assert [e["value"] for e in p["spec"]["containers"][0]["env"][:2]] == ["no", "60:30"], p["spec"]["containers"][0]["env"]
' "$tmp/out.yaml"
check "a merge key (<<) is merged, as kubectl merges it" python3 -c '
import sys, yaml
p = yaml.safe_load(open(sys.argv[1]))
r = p["spec"]["containers"][1]["resources"]["requests"]
assert r == {"cpu": "1", "memory": "1Gi"}, r' "$tmp/out.yaml"
check "a changed document keeps the comment above it" test "$(head -n 1 "$tmp/out.yaml")" = "# header comment"

printf '# a header\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n# between\n...\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}' > "$tmp/asis.yaml"
"$bin" review -f "$tmp/asis.yaml" > "$tmp/out" 2>/dev/null
check "a file podshaper leaves alone comes out byte for byte (comments, ..., no final newline)" cmp -s "$tmp/asis.yaml" "$tmp/out"
check "... and -o diff prints nothing for it" test -z "$("$bin" review -f "$tmp/asis.yaml" -o diff 2>/dev/null)"
sed 's/$/\r/' "$tmp/workloads.yaml" > "$tmp/crlf.yaml"
"$bin" review -f "$tmp/crlf.yaml" > "$tmp/out" 2>/dev/null
check "a CRLF file comes out with CRLF line ends only" test "$(grep -c $'\r$' "$tmp/out")" = "$(wc -l < "$tmp/out")"
bin_abs=$(realpath "$bin")
mkdir -p "$tmp/with space"; cp "$tmp/workloads.yaml" "$tmp/with space/my pod.yaml"
(cd "$tmp/with space" && "$bin_abs" review -f "my pod.yaml" -o diff > ../space.diff 2>/dev/null && cp "my pod.yaml" orig.yaml && patch -s -p0 < ../space.diff && "$bin_abs" review -f orig.yaml 2>/dev/null | cmp -s - "my pod.yaml")
check "-o diff applies with patch -p0, the file named in it (a space in its name)" test $? -eq 0
printf '[1, 2]\n' > "$tmp/array.json"; printf 'just text\n' > "$tmp/scalar.yaml"
for f in array.json scalar.yaml; do
  set +e; "$bin" review -f "$tmp/$f" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
  check "-f $f: a document that is not an object exits 2, saying so" test "$rc $(grep -c 'is not a Kubernetes object' "$tmp/err")" = "2 1"
done
printf '\xef\xbb\xbf' | cat - "$tmp/dra-pod.json" > "$tmp/bom.json"
"$bin" review -f "$tmp/bom.json" -f "$tmp/dra-cluster.json" > "$tmp/out" 2>/dev/null
check "a byte order mark before JSON: read as JSON, printed as JSON" \
  python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["kind"] == "List"' "$tmp/out"

# The cluster's objects as kubectl and the API server list them: a NodeList's items carry no
# kind; --cluster takes YAML too; a Namespace alone is read for its labels.
python3 - "$tmp/dra-cluster.json" "$tmp/nodelist.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
nodes = [dict((k, v) for k, v in i.items() if k != "kind") for i in c["items"] if i["kind"] == "Node"]
json.dump({"apiVersion": "v1", "kind": "NodeList", "items": nodes}, open(sys.argv[2], "w"))
PY
set +e; "$bin" review -f "$tmp/one-gpu.yaml" -f "$tmp/nodelist.json" >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "-f: a NodeList's items are read as Nodes (no 'given no Node')" test "$rc $(grep -c 'given no Node' "$tmp/err")" = "1 0"
python3 -c 'import json,sys,yaml; print(yaml.safe_dump(json.load(open(sys.argv[1]))))' "$tmp/dra-cluster.json" > "$tmp/cluster.yaml"
"$bin" review --cluster "$tmp/cluster.yaml" --output pod < "$cases/dra-template-8-gpus/review.json" > "$tmp/from-yaml.json" 2>/dev/null
check "--cluster takes YAML" cmp -s "$tmp/from-yaml.json" "$tmp/in-cluster.json"
cat > "$tmp/opted-out.yaml" <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: batch, labels: {podshaper.io/inject: disabled}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: batch, labels: {podshaper.io/inject: "true"}, annotations: {podshaper.io/batch-bytes: 8Mi}}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 8}}}
YAML
"$bin" review -f "$tmp/opted-out.yaml" > "$tmp/out" 2>/dev/null
check "a Namespace in the input that opts out, without Nodes: its pod is left as written" cmp -s "$tmp/opted-out.yaml" "$tmp/out"
sed 's/namespace: dra-demo/namespace: ml/' "$root/tests/review/corpus/dra-pod.yaml" | grep -v 'namespace: ml' > "$tmp/dra-no-ns.yaml"
set +e; "$bin" review -f "$tmp/dra-no-ns.yaml" -f "$root/tests/review/corpus/nodes.yaml" -n team >/dev/null 2>"$tmp/err"; rc=$?; set -e
check "a ResourceClaimTemplate naming no namespace is in -n's, as its pod" test $rc -eq 0

# ShmProfiles (a workload's measured runs) are read from -f's input and --cluster as the
# webhook reads them from its watch, and never shaped as workloads. The pod is sized from its
# profile at the config's default podshaper.io/shm-sizing, measured ("measured: ..." in its
# formula); its run ended an hour ago, and review weighs it at the time review runs.
python3 - "$tmp" "$cases" <<'PY'
import datetime, json, sys, yaml
tmp, cases = sys.argv[1:]
annotations = {"podshaper.io/workload": "train-7b", "podshaper.io/dataloader-workers": "2", "podshaper.io/batch-bytes": "8Mi"}
def declared_inputs(a):  # api/shm_profile.cc declaredInputs: FNV-1a of the DataLoader and NCCL annotations
    h = 2166136261
    def fnv(text):
        nonlocal h
        for c in text.encode():
            h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    for k in ("podshaper.io/dataloader-workers", "podshaper.io/prefetch-factor", "podshaper.io/batch-bytes",
              "podshaper.io/batch-shape", "podshaper.io/batch-dtype", "podshaper.io/nccl-communicators"):
        if k in a:
            fnv(k); fnv("="); fnv(a[k]); fnv("\n")
    return "%08x" % h
ended = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
mi = 1 << 20
run = {"pod": "train-7b-0", "podUID": "u1", "run": 1, "endedAt": ended, "ranks": 8, "sizeBytes": 2048 * mi,
       "peakBytes": 400 * mi, "end": "Completed", "inputs": declared_inputs(annotations)}
def profile(namespace=None, need=50 * mi):
    meta = {"name": "train-7b"}
    if namespace: meta["namespace"] = namespace
    return {"apiVersion": "podshaper.io/v1alpha1", "kind": "ShmProfile", "metadata": meta,
            "spec": {"workload": 'workload "train-7b" (podshaper.io/workload)'},
            "status": {"runs": [run], "runCount": 1, "inputs": run["inputs"], "lastSize": "2Gi", "peak": "400Mi",
                       "recommended": "480Mi", "recommendation": {"needPerRankBytes": need, "headroomPercent": 20,
                                                                  "ranks": 8, "bytes": 480 * mi, "message": "m"}}}
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "train-7b-1", "labels": {"podshaper.io/inject": "true"}, "annotations": annotations},
       "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
def write(name, *objects):
    with open(f"{tmp}/{name}", "w") as f: yaml.safe_dump_all(objects, f, sort_keys=False)
write("profiled-pod.yaml", pod)
write("profile.yaml", profile())
write("profile-other.yaml", profile("other"))
write("profile-forged.yaml", profile("ml", need=1))
write("profile-unnamed.yaml", dict(profile("ml"), metadata={"namespace": "ml"}))
# As the API server lists them: a ShmProfileList's items carry no kind.
l = {"apiVersion": "podshaper.io/v1alpha1", "kind": "ShmProfileList", "items": [profile("ml")]}
del l["items"][0]["kind"]
json.dump(l, open(f"{tmp}/profile-cluster.json", "w"))
# The AdmissionReview form: the pod in ml, and kubectl get namespaces,nodes,shmprofiles -A -o json.
review = json.load(open(f"{cases}/seed-no-cluster-nccl-reserve/review.json"))
review["request"]["object"] = dict(pod, metadata=dict(pod["metadata"], namespace="ml"))
json.dump(review, open(f"{tmp}/profiled-review.json", "w"))
c = json.load(open(f"{cases}/seed-8xh100-validated-p2p/cluster.json"))
json.dump({"apiVersion": "v1", "kind": "List", "items": c["namespaces"] + c["nodes"] + [profile("ml")]},
          open(f"{tmp}/cluster-with-profile.json", "w"))
PY
formula_of() {  # formula_of FILE: the shaped pod's podshaper.io/shm-formula
  python3 -c 'import sys, yaml
pod = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "Pod")
print(pod["metadata"]["annotations"].get("podshaper.io/shm-formula", ""))' "$1"
}
"$bin" review -f "$tmp/profile.yaml" >"$tmp/out" 2>"$tmp/err"
check "-f with a ShmProfile alone: printed as read, not reviewed as a workload" \
  test "$(cmp -s "$tmp/profile.yaml" "$tmp/out" && echo same) $(grep -c 'ShmProfile' "$tmp/err")" = "same 0"
check "... and it is no pod template" contains "$(cat "$tmp/err")" "no pod or pod template found"
"$bin" review -f "$tmp/profile-unnamed.yaml" >/dev/null 2>"$tmp/err"
check "-f with a ShmProfile that has no name: not read, saying why" \
  contains "$(cat "$tmp/err")" "Warning: ShmProfile ml/(no name): not read: a ShmProfile is found by its name, the workload's"
"$bin" review -f "$tmp/profiled-pod.yaml" -f "$tmp/profile.yaml" -n ml >"$tmp/out" 2>"$tmp/err"
check "-f: the pod's ShmProfile in the input (no namespace: -n's, as its pod) sizes it: 'measured: ...'" \
  test "$(formula_of "$tmp/out" | cut -c1-10)" = "measured: "
check "... its run counted from now: 'the last 1 h ago'" contains "$(formula_of "$tmp/out")" "over 1 run, the last 1 h ago"
"$bin" review -f "$tmp/profiled-pod.yaml" -f "$tmp/profile-other.yaml" -n ml >"$tmp/out" 2>"$tmp/err"
check "-f: a ShmProfile of that name in another namespace is not the pod's" \
  test "$(formula_of "$tmp/out" | cut -c1-10)" != "measured: "
"$bin" review -f "$tmp/profiled-pod.yaml" -n ml --cluster "$tmp/profile-cluster.json" >"$tmp/out" 2>"$tmp/err"
check "--cluster: the ShmProfiles of kubectl get shmprofiles -A -o json size the pod" \
  test "$(formula_of "$tmp/out" | cut -c1-10)" = "measured: "
"$bin" review -f "$tmp/profiled-pod.yaml" -f "$tmp/profile-forged.yaml" -n ml >"$tmp/out" 2>"$tmp/err"
check "-f: a ShmProfile whose recommendation its runs do not give: a warning naming it" \
  grep -q "^Warning: Pod ml/train-7b-1: .*ShmProfile" "$tmp/err"
check "... and the pod is not sized from it" test "$(formula_of "$tmp/out" | cut -c1-10)" != "measured: "
"$bin" review --cluster "$tmp/cluster-with-profile.json" --output pod < "$tmp/profiled-review.json" >"$tmp/out" 2>"$tmp/err"
check "the AdmissionReview form: the ShmProfiles of --cluster size the pod" \
  test "$(formula_of "$tmp/out" | cut -c1-10)" = "measured: "
"$bin" review --cluster "$tmp/cluster.json" --output pod < "$tmp/profiled-review.json" >"$tmp/out" 2>"$tmp/err"
check "... and a --cluster without it: none, the formula" test "$(formula_of "$tmp/out" | cut -c1-10)" != "measured: "

python3 - "$cases/seed-no-cluster-nccl-reserve/review.json" "$tmp/numbers.json" <<'PY'
import sys
text = open(sys.argv[1]).read()
# Numbers JSON readers would write otherwise, put in as text: a 30-digit integer and 1e2.
text = text.replace('"spec": {', '"spec": {"priority": 123456789012345678901234567890, "activeDeadlineSeconds": 1e2, ', 1)
open(sys.argv[2], "w").write(text)
PY
"$bin" review --output pod < "$tmp/numbers.json" > "$tmp/out" 2>/dev/null
check "--output pod prints numbers as the pod wrote them" \
  test "$(grep -c -e '"priority": 123456789012345678901234567890,' -e '"activeDeadlineSeconds": 1e2' "$tmp/out")" = 2

for input in 'not json' '{"kind":"Pod","apiVersion":"v1"}' '' '[1,2]'; do
  set +e; "$bin" review <<<"$input" >"$tmp/out" 2>"$tmp/err"; rc=$?; set -e
  check "non-AdmissionReview '$input' exits 2" test $rc -eq 2
  check "with one line on stderr" test "$(wc -l < "$tmp/err")" -eq 1
  check "and nothing on stdout" test ! -s "$tmp/out"
done

printf 'defaults:\n  workers: many\n' > "$tmp/bad.yaml"
set +e; "$bin" review --config "$tmp/bad.yaml" < "$cases/seed-no-cluster-nccl-reserve/review.json" 2>"$tmp/err"; rc=$?; set -e
check "a bad config exits 2" test $rc -eq 2
check "naming the key" contains "$(cat "$tmp/err")" "defaults.workers"
set +e; "$bin" review --config "$tmp/missing.yaml" </dev/null 2>"$tmp/err"; rc=$?; set -e
check "a missing config file exits 2" test $rc -eq 2
set +e; "$bin" frobnicate 2>/dev/null; rc=$?; set -e
check "an unknown command exits 2" test $rc -eq 2
finish
