#!/usr/bin/env bash
# The webhook benchmark: podshaper-webhook against the peer (tests/bench/peerwebhook, a
# controller-runtime webhook doing the same mutation), driven alike by podshaper-loadgen
# over HTTPS keep-alive on loopback, one server at a time, on the same inputs
# (bench/inputs/: AdmissionReviews as the API server sends them). Then the ceiling: nginx
# (Debian's nginx-light) answering each review with the bytes podshaper answered, with
# nothing to decide: TLS, HTTP and the same bytes in and out, on the same cores. A load
# generator on one core cannot saturate nginx on the other, so each saturated run also
# records the server's own CPU time (µs of CPU per request: what one review costs it), and
# a last pass gives podshaper and nginx the same budget, half a core each (a CFS quota),
# with the generator on every core: both saturated, taking turns for --rounds rounds
# (default 3), their req/s compared round by round.
#
#   scripts/bench/webhook.sh [--duration S] [--soak S] [--soak-only] [--rounds N] [--out DIR]
#
# Writes one JSON per run into DIR (default build/bench/webhook); scripts/bench/report.py
# turns them into the table and the plot.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${PODSHAPER_BIN:-$root/build/bin}
out=$root/build/bench/webhook
duration=10
soak=600
soak_only=no
rounds=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --soak) soak=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --soak-only) soak_only=yes; shift ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--duration S] [--soak S] [--rounds N] [--out DIR]" >&2; exit 2 ;;
  esac
done
loadgen=$bin/podshaper-loadgen
for b in podshaper-webhook peer-webhook podshaper-loadgen; do
  [[ -x $bin/$b ]] || { echo "webhook bench: $bin/$b is missing (make build; scripts/bench-build.sh)" >&2; exit 1; }
done
mkdir -p "$out"
[[ $soak_only == yes ]] && rm -f "$out"/podshaper-soak-*.json || rm -f "$out"/*.json
tmp=$(mktemp -d)
server_pid=""
cleanup() {
  local p
  # The half-core rounds' servers are stopped already: a kill that finds none is no failure.
  for p in $server_pid ${nginx_pid:-} ${podshaper_pid:-}; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
log() { echo "webhook bench: $*" >&2; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/tls.key" -out "$tmp/tls.crt" 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=https://127.0.0.1:$port/mutate-v1-pod
# The server and the load generator on cores of their own (half each), so that the
# generator's own TLS and JSON work does not eat into what the server gets.
ncpu=$(nproc)
cores=$(( ncpu >= 2 ? ncpu / 2 : 1 ))
server_cpus=0-$((cores - 1))
loadgen_cpus=$([[ $ncpu -ge 2 ]] && echo "$cores-$((ncpu - 1))" || echo 0)

start() {  # start podshaper|peer [PORT]
  local port=${2:-$port}
  case $1 in
    podshaper) taskset -c "$server_cpus" "$bin/podshaper-webhook" serve --listen "127.0.0.1:$port" --tls-cert "$tmp/tls.crt" \
                 --tls-key "$tmp/tls.key" --threads "$cores" 2>"$tmp/$1.log" & ;;
    peer) GOMAXPROCS=$cores taskset -c "$server_cpus" "$bin/peer-webhook" serve --listen "127.0.0.1:$port" --tls-cert "$tmp/tls.crt" \
            --tls-key "$tmp/tls.key" 2>"$tmp/$1.log" & ;;
  esac
  server_pid=$!
  for _ in $(seq 100); do curl -sfk "https://127.0.0.1:$port/healthz" >/dev/null && return 0; sleep 0.1; done
  log "$1 did not start"; cat "$tmp/$1.log" >&2; exit 1
}
stop() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status"; }
load() {  # load NAME ARGS...: one loadgen run into $out/NAME.json
  taskset -c "$loadgen_cpus" "$loadgen" --url "$url" --ca "$tmp/tls.crt" --json "${@:2}" >"$out/$1.json"
}
# CPU seconds the server (and its children: nginx's workers) has used.
cpu_s() {
  local ticks=0 p
  for p in $server_pid $(pgrep -P "$server_pid"); do ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  python3 -c "print($ticks / $(getconf CLK_TCK))"
}
# saturate NAME URL BODY [CPUS]: a closed-loop run into $out/NAME.json, with the server's CPU
# per request (its CPU over the run, warm-up included, over the requests of the run at the
# measured rate) in $out/NAME-cpu.json.
saturate() {
  local before after
  before=$(cpu_s)
  taskset -c "${4:-$loadgen_cpus}" "$loadgen" --url "$2" --ca "$tmp/tls.crt" --json --body "$3" --mode saturate \
    --connections 4 --duration "$duration" >"$out/$1.json"
  after=$(cpu_s)
  python3 - "$out/$1.json" "$before" "$after" "$duration" >"$out/$1-cpu.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
cpu = float(sys.argv[3]) - float(sys.argv[2])
served = run["requests_per_s"] * (float(sys.argv[4]) + run.get("warmup_s", 0))
print(json.dumps({"cpu_s": round(cpu, 2), "cpu_us_per_request": round(1e6 * cpu / served, 1)}))
PY
}
# budget_cgroup NAME: a CPU cgroup (v1 or v2) of half a core; nothing printed where none
# can be made.
budget_cgroup() {
  local v1=/sys/fs/cgroup/cpu v2=/sys/fs/cgroup
  if [[ -w $v1 && -e $v1/cpu.cfs_quota_us ]]; then
    mkdir -p "$v1/$1" && echo 100000 >"$v1/$1/cpu.cfs_period_us" && echo 50000 >"$v1/$1/cpu.cfs_quota_us" &&
      echo "$v1/$1"
  elif [[ -w $v2 && -e $v2/cgroup.controllers ]] && grep -qw cpu "$v2/cgroup.controllers"; then
    mkdir -p "$v2/$1" && echo "50000 100000" >"$v2/$1/cpu.max" && echo "$v2/$1"
  fi
}
into_budget() {  # the server and its children into the cgroup $1
  local p
  for p in $server_pid $(pgrep -P "$server_pid"); do echo "$p" >"$1/cgroup.procs"; done
}

servers="podshaper peer"
[[ $soak_only == yes ]] && servers=""
for server in $servers; do
  start $server
  log "$server on CPUs $server_cpus ($cores threads), the load generator on CPUs $loadgen_cpus"
  load "$server-warmup" --body "$root/bench/inputs/realistic-pod.json" --mode saturate --duration 3 >/dev/null
  if [[ $server == podshaper ]]; then  # what the ceiling answers
    for input in realistic seed; do
      curl -sfk --data-binary "@$root/bench/inputs/$input-pod.json" -H 'Content-Type: application/json' "$url" \
        >"$tmp/$input.response"
    done
  fi
  echo "{\"rss_kib\": $(rss_kib)}" >"$out/$server-rss-idle.json"
  for input in realistic seed; do
    body=$root/bench/inputs/$input-pod.json
    log "$server $input: saturation, ${duration}s"
    saturate "$server-$input-saturate" "$url" "$body"
    log "$server $input: 1000 req/s, ${duration}s"
    load "$server-$input-fixed1000" --body "$body" --mode fixed --rate 1000 --duration "$duration"
  done
  # Latency against offered load (the plot), on the realistic pod.
  for rate in 250 500 1000 1500 2000 3000 4000 5000 6000; do
    log "$server: sweep $rate req/s"
    load "$server-sweep-$rate" --body "$root/bench/inputs/realistic-pod.json" --mode fixed --rate "$rate" \
      --duration 5 --connections 64 || true
  done
  echo "{\"rss_kib\": $(rss_kib), \"hwm_kib\": $(hwm_kib)}" >"$out/$server-rss-steady.json"
  stop
done

# The ceiling: nginx, one worker per core podshaper had, on its cores, the same
# certificate and TLS 1.3, every request kept alive; each review's answer is podshaper's.
if [[ $soak_only == no ]]; then
  nginx=$(command -v nginx || true)
  [[ -x /usr/sbin/nginx ]] && nginx=/usr/sbin/nginx
  if [[ -z $nginx ]]; then
    log "nginx is not installed (scripts/deps.sh --bench): no ceiling measured"
  else
    mkdir -p "$tmp/answers"
    cp "$tmp/realistic.response" "$tmp/answers/realistic"
    cp "$tmp/seed.response" "$tmp/answers/seed"
    python3 - "$tmp" "$port" "$cores" <<'PY'
import sys
tmp, port, cores = sys.argv[1:4]
# user: its workers read the answers in this private temporary directory (ignored, with a
# notice, when the bench does not run as root).
conf = f"""user root;
worker_processes {cores};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  client_max_body_size 4m;
  client_body_temp_path {tmp}/nginx-body;
  open_file_cache max=16;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {tmp}/tls.crt;
    ssl_certificate_key {tmp}/tls.key;
    ssl_protocols TLSv1.3;
    default_type application/json;
    location = /healthz {{ return 200 "ok"; }}
    # A POST to a file is refused (405); error_page answers it with the file, as a GET.
    location ~ ^/(realistic|seed)$ {{ root {tmp}/answers; error_page 405 =200 $uri; }}
  }}
}}
"""
open(f"{tmp}/nginx.conf", "w").write(conf)
PY
    taskset -c "$server_cpus" "$nginx" -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/nginx.log" 2>>"$tmp/nginx.log" &
    server_pid=$!
    for _ in $(seq 100); do curl -sfk "https://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    for input in realistic seed; do
      body=$root/bench/inputs/$input-pod.json
      cmp -s <(curl -sfk --data-binary "@$body" "https://127.0.0.1:$port/$input") "$tmp/$input.response" ||
        { log "nginx does not answer podshaper's bytes for $input"; cat "$tmp/nginx.log" >&2; exit 1; }
      log "nginx (the ceiling) $input: saturation, ${duration}s"
      saturate "nginx-$input-saturate" "https://127.0.0.1:$port/$input" "$body"
    done
    stop
    # The same half core each (a quota of its own), the generator on every core: both
    # saturated. Both servers stay up and take turns, round after round, so that what the
    # machine does beside them (a noisy neighbour, a throttled period) falls on both.
    nginx_cgroup=$(budget_cgroup podshaper-bench-nginx || true)
    podshaper_cgroup=$(budget_cgroup podshaper-bench-podshaper || true)
    if [[ -z $nginx_cgroup || -z $podshaper_cgroup ]]; then
      log "no CPU cgroup to write here: the half-core rounds are left out"
    else
      taskset -c "$server_cpus" "$nginx" -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/nginx.log" 2>>"$tmp/nginx.log" &
      nginx_pid=$!
      for _ in $(seq 100); do curl -sfk "https://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
      server_pid=$nginx_pid
      into_budget "$nginx_cgroup"
      port2=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
      start podshaper "$port2"
      podshaper_pid=$server_pid
      into_budget "$podshaper_cgroup"
      for round in $(seq "$rounds"); do
        for input in realistic seed; do
          body=$root/bench/inputs/$input-pod.json
          log "round $round of $rounds, $input: nginx, then podshaper, each on half a core, the generator on CPUs 0-$((ncpu - 1))"
          server_pid=$nginx_pid
          saturate "nginx-$input-half-core-$round" "https://127.0.0.1:$port/$input" "$body" "0-$((ncpu - 1))"
          server_pid=$podshaper_pid
          saturate "podshaper-$input-half-core-$round" "https://127.0.0.1:$port2/mutate-v1-pod" "$body" "0-$((ncpu - 1))"
        done
      done
      server_pid=$nginx_pid
      stop
      server_pid=$podshaper_pid
      stop
      rmdir "$nginx_cgroup" "$podshaper_cgroup" 2>/dev/null || true
    fi
  fi
fi

# The soak: podshaper alone at 1000 req/s, RSS sampled every 10 s.
if [[ $soak -gt 0 ]]; then
  start podshaper
  log "podshaper: soak, 1000 req/s for ${soak}s"
  taskset -c "$loadgen_cpus" "$loadgen" --url "$url" --ca "$tmp/tls.crt" --json --body "$root/bench/inputs/realistic-pod.json" \
    --mode fixed --rate 1000 --duration "$soak" >"$out/podshaper-soak-load.json" &
  gen=$!
  samples="[]"
  start_s=$SECONDS
  while kill -0 $gen 2>/dev/null; do
    samples=$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); s.append([int(sys.argv[2]), int(sys.argv[3])]); print(json.dumps(s))' \
      "$samples" $((SECONDS - start_s)) "$(rss_kib)")
    sleep 10
  done
  wait $gen
  echo "{\"samples\": $samples, \"hwm_kib\": $(hwm_kib)}" >"$out/podshaper-soak-rss.json"
  stop
fi
log "results in $out"
