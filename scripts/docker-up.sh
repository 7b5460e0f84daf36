#!/usr/bin/env bash
# Makes sure a Docker engine answers: the image builds (scripts/images.sh,
# scripts/node-images.sh) need one. Where none answers but dockerd is installed and this
# runs as root (a fresh machine whose engine was not started, or one that stopped), it
# starts dockerd in a session of its own (log: /var/log/podshaper-dockerd.log) and
# waits up to 60 s for it. Otherwise it says why and fails.
set -euo pipefail
docker info >/dev/null 2>&1 && exit 0
command -v dockerd >/dev/null 2>&1 ||
  { echo "docker-up: no Docker engine answers and dockerd is not installed" >&2; exit 1; }
[[ $(id -u) == 0 ]] ||
  { echo "docker-up: no Docker engine answers; start it (as root: dockerd)" >&2; exit 1; }
# Another caller may be starting it at the same moment: one start, under a lock.
exec 9>/run/podshaper-docker-up.lock
flock 9
if ! docker info >/dev/null 2>&1; then
  echo "docker-up: no Docker engine answers: starting dockerd (log: /var/log/podshaper-dockerd.log)" >&2
  setsid nohup dockerd >>/var/log/podshaper-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
fi
docker info >/dev/null 2>&1 ||
  { echo "docker-up: dockerd did not answer within 60 s; its log ends:" >&2
    tail -n 20 /var/log/podshaper-dockerd.log >&2; exit 1; }
echo "docker-up: the Docker engine answers" >&2
