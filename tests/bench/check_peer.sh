#!/usr/bin/env bash
# check_peer.sh ROOT: the benchmark peer (build/bin/peer-webhook) does podshaper's mutation.
# Every golden case's review (decided without a cluster view, as both servers run in the
# benchmark) and the variants check_peer.py makes are POSTed to `podshaper-webhook serve`
# and to `peer-webhook serve` (same config); each answer's JSON Patch is applied to the
# pod, and the two pods must be equal except podshaper.io/shaped-by's value and podshaper.io/warnings; a denial
# must be a denial from both. podshaper's `review` must agree with its `serve`.
# podshaper's binaries: $PODSHAPER_BIN, else ROOT/build/bin, else /tmp/mainbuild/bin.
source "$(cd "$(dirname "$0")/../cli" && pwd)/lib.sh"
root=$(cd "${1:?usage: check_peer.sh ROOT}" && pwd)
here=$root/tests/bench
bindir=${PODSHAPER_BIN:-$root/build/bin}
[[ -x $bindir/podshaper-webhook ]] || bindir=/tmp/mainbuild/bin
podshaper=$bindir/podshaper-webhook
peer=${PEER_WEBHOOK:-$root/build/bin/peer-webhook}
[[ -x $podshaper ]] || { echo "check_peer: no podshaper-webhook in $bindir" >&2; exit 1; }
[[ -x $peer ]] || "$root/scripts/bench-build.sh" >/dev/null
tmp=$(mktemp -d)
pids=()
stop_servers() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; pids=(); }
trap 'stop_servers; rm -rf "$tmp"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=localhost" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$tmp/tls.key" -out "$tmp/tls.crt" 2>/dev/null
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
await() { for _ in $(seq 100); do curl -sf --cacert "$tmp/tls.crt" "$1/healthz" >/dev/null && return 0; sleep 0.1; done; return 1; }

# Cases: the golden ones, then the variants. A case is a directory with review.json
# and, optionally, config.yaml.
python3 "$here/check_peer.py" variants "$root/tests/golden/cases" "$tmp/variants"
cases=("$root"/tests/golden/cases/*/ "$tmp"/variants/*/)

# One pair of servers per distinct config.
declare -A byconfig
for c in "${cases[@]}"; do
  cfg=none; [[ -f $c/config.yaml ]] && cfg=$(sha256sum <"$c/config.yaml" | cut -c1-12)
  byconfig[$cfg]+="$c "
done

total=0; matched=0; zero_fixups=0
for cfg in "${!byconfig[@]}"; do
  read -r -a group <<<"${byconfig[$cfg]}"
  cfgargs=(); [[ -f ${group[0]}/config.yaml ]] && cfgargs=(--config "${group[0]}config.yaml")
  pport=$(freeport); qport=$(freeport)
  "$podshaper" serve --listen "127.0.0.1:$pport" --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key" "${cfgargs[@]}" \
    >>"$tmp/podshaper.log" 2>&1 & pids+=($!)
  "$peer" serve --listen "127.0.0.1:$qport" --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key" "${cfgargs[@]}" \
    >>"$tmp/peer.log" 2>&1 & pids+=($!)
  purl=https://127.0.0.1:$pport; qurl=https://127.0.0.1:$qport
  if ! await "$purl" || ! await "$qurl"; then
    fail "servers for config $cfg did not start"; tail -5 "$tmp/podshaper.log" "$tmp/peer.log" >&2; stop_servers; continue
  fi
  for c in "${group[@]}"; do
    name=$(basename "$c"); [[ -f $c/cluster.json ]] && name+=" (without its cluster view)"
    total=$((total + 1))
    # podshaper's offline review must say what its server says.
    offline=$("$podshaper" review "${cfgargs[@]}" <"$c/review.json" | python3 -c \
      'import json,sys; r=json.load(sys.stdin)["response"]; print(r.get("allowed"), r.get("patch",""))')
    online=$(curl -s --cacert "$tmp/tls.crt" -H 'Content-Type: application/json' --data-binary @"$c/review.json" \
      "$purl/mutate-v1-pod" | python3 -c \
      'import json,sys; r=json.load(sys.stdin)["response"]; print(r.get("allowed"), r.get("patch",""))')
    [[ $offline == "$online" ]] || fail "$name: podshaper review and serve disagree"
    verdict=$(python3 "$here/check_peer.py" compare "$c/review.json" "$purl/mutate-v1-pod" "$qurl/mutate-v1-pod" "$tmp/tls.crt")
    read -r result what zeros why < <(python3 -c '
import json,sys; v=json.loads(sys.argv[1])
print(v["result"], v.get("podshaper","-"), len(v.get("go_zero_values",[])), v.get("why","").replace("\n"," "))' "$verdict")
    if [[ $result == match && $name == apiserver-form* && $zeros -gt 0 ]]; then
      fail "$name: the peer's patch adds $zeros zero-value field(s) to a pod in the API server's form"
    elif [[ $result == match ]]; then
      matched=$((matched + 1))
      [[ $zeros -gt 0 ]] && zero_fixups=$((zero_fixups + 1))
      pass "$name: $what by both$([[ $zeros -gt 0 ]] && echo "; peer also writes $zeros Go zero-value field(s)")"
    else
      fail "$name: $why"
    fi
  done
  stop_servers
done
echo "peer matches podshaper on $matched of $total cases ($zero_fixups of them once the null/{} members Go's encoding of the typed Pod adds, e.g. metadata.creationTimestamp and status, are dropped)"
finish
