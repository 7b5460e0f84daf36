#!/usr/bin/env bash
# The container images: scripts/images.sh builds podshaper-{webhook,operator,agent}
# (cold: debootstrap, apt and a compile, several minutes; cached: seconds), then each
# binary must start inside its image as the manifests run it (nonroot 65532, read-only
# root file system, no capabilities, no network), and each image must be minimal:
# the binary, its shared libraries, a few /etc files; no shell, no package manager.
# Without a Docker engine it is skipped (exit 77, ctest's SKIP_RETURN_CODE).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tag=${PODSHAPER_IMAGE_TAG:-$(sed -n 's/^project(podshaper VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")}

if ! docker info >/dev/null 2>&1; then
  echo "skipped: no Docker engine"
  exit 77
fi

failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

start=$(date +%s)
bash "$root/scripts/images.sh"
echo "images: scripts/images.sh took $(($(date +%s) - start)) s"

# As the manifests run them: runAsUser/Group 65532, readOnlyRootFilesystem, drop ALL.
run_in() { # IMAGE ARGS...
  local image=$1
  shift
  docker run --rm --read-only --user 65532:65532 --cap-drop ALL --security-opt no-new-privileges \
    --network none --tmpfs /tmp "$image" "$@"
}

for b in webhook operator agent shm; do
  image=podshaper-$b:$tag
  user=65532:65532
  [[ $b != shm ]] || user=0:0  # the node component: root with two capabilities (docs/shm.md)
  config=$(docker image inspect -f '{{.Config.User}} {{json .Config.Entrypoint}}' "$image")
  if [[ $config == "$user [\"/usr/local/bin/podshaper-$b\"]" ]]; then
    pass "$image: USER $user, ENTRYPOINT /usr/local/bin/podshaper-$b"
  else
    fail "$image: user and entrypoint are $config"
  fi

  # Minimal: list the image's files.
  cid=$(docker create "$image")
  files=$(docker export "$cid" | tar -t)
  docker rm "$cid" >/dev/null
  bad=$(grep -E '^(usr/)?s?bin/(sh|bash|dash|busybox|apt|apt-get|dpkg|su|sudo|env|ldconfig)$|^var/lib/dpkg/|^etc/apt/' <<<"$files" || true)
  if [[ -z $bad ]]; then
    pass "$image: no shell, no package manager ($(grep -cv '/$' <<<"$files") entries)"
  else
    fail "$image: holds $(tr '\n' ' ' <<<"$bad")"
  fi
  executables=$(grep -E '^usr/local/bin/.' <<<"$files" || true)
  [[ $executables == "usr/local/bin/podshaper-$b" ]] && pass "$image: one program, podshaper-$b" ||
    fail "$image: /usr/local/bin holds $(tr '\n' ' ' <<<"$executables")"
  if docker run --rm --entrypoint /bin/sh "$image" -c true >/dev/null 2>&1; then
    fail "$image: /bin/sh runs"
  else
    pass "$image: /bin/sh does not run"
  fi
  size=$(docker image inspect -f '{{.Size}}' "$image")
  if ((size < 64000000)); then
    pass "$image: $((size / 1000000)) MB"
  else
    fail "$image: $((size / 1000000)) MB, over 64 MB"
  fi
done

for b in webhook operator; do
  image=podshaper-$b:$tag
  if out=$(run_in "$image" --help 2>&1) && grep -q "podshaper-$b" <<<"$out"; then
    pass "$image: podshaper-$b --help exits 0"
  else
    fail "$image: podshaper-$b --help: $out"
  fi
done

image=podshaper-shm:$tag
if out=$(run_in "$image" --help 2>&1) && grep -q -- "-kubelet-root" <<<"$out"; then
  pass "$image: podshaper-shm --help exits 0"
else
  fail "$image: podshaper-shm --help: $out"
fi

image=podshaper-agent:$tag
err=$(mktemp)
trap 'rm -f "$err"' EXIT
if out=$(run_in "$image" probe 2>"$err"); then
  if python3 -c 'import json, sys
report = json.loads(sys.stdin.read())
assert isinstance(report, dict) and "gpus" in report and "host" in report, report' <<<"$out"; then
    pass "$image: podshaper-agent probe exits 0 with a JSON report ($(tr -d ' \n' <<<"$out" | cut -c1-80)...)"
  else
    fail "$image: podshaper-agent probe printed no JSON report: $out"
  fi
else
  fail "$image: podshaper-agent probe failed: $out $(cat "$err")"
fi

# memlock-probe as the DaemonSet runs it: the limit it got (docker's --ulimit stands in for
# the NRI annotation) in the directory it shares with the agent, then SIGTERM ends it with 0.
shared=$(mktemp -d)
chmod 777 "$shared"
trap 'rm -f "$err"; rm -rf "$shared"' EXIT
cid=$(docker run -d --read-only --user 65532:65532 --cap-drop ALL --security-opt no-new-privileges --network none \
  --ulimit memlock=4194304:4194304 -v "$shared:/run/podshaper-memlock" "$image" \
  memlock-probe --output /run/podshaper-memlock/limits)
for _ in $(seq 100); do [[ -s $shared/limits ]] && break; sleep 0.1; done
got=$(cat "$shared/limits" 2>/dev/null || true)
if [[ $got == '{"hard":4194304,"soft":4194304}' ]]; then
  pass "$image: podshaper-agent memlock-probe writes the RLIMIT_MEMLOCK it got ($got)"
else
  fail "$image: podshaper-agent memlock-probe wrote \"$got\": $(docker logs "$cid" 2>&1)"
fi
docker stop -t 5 "$cid" >/dev/null
code=$(docker inspect -f '{{.State.ExitCode}}' "$cid")
docker rm "$cid" >/dev/null
[[ $code == 0 ]] && pass "$image: memlock-probe exits 0 on SIGTERM" || fail "$image: memlock-probe exited $code on SIGTERM"

echo "images_test: $failures failure(s) in $(($(date +%s) - start)) s"
((failures == 0))
