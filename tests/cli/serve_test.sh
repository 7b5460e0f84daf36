#!/usr/bin/env bash
# `podshaper-webhook serve`: HTTPS, the mutate path, health, metrics, certificate hot reload.
source "$(dirname "$0")/lib.sh"
bin=$1; root=$2
cases=$root/tests/golden/cases
tmp=$(mktemp -d)
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

makecert() {  # makecert NAME: a CA-signed serving cert for 127.0.0.1 with a fresh serial
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$1" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -keyout "$tmp/$1.key" -out "$tmp/$1.crt" 2>/dev/null
}
makecert first
makecert second
cp "$tmp/first.crt" "$tmp/tls.crt"; cp "$tmp/first.key" "$tmp/tls.key"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --listen "127.0.0.1:$port" --tls-cert "$tmp/tls.crt" --tls-key "$tmp/tls.key" \
  --log-format json --log-level debug >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 50); do curl -sk "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done

url="https://127.0.0.1:$port"
c() { curl -sS --cacert "$tmp/$1.crt" "${@:2}"; }
check "healthz answers ok over verified TLS" test "$(c first "$url/healthz")" = "ok"
check "readyz answers ok without a cluster" test "$(c first "$url/readyz")" = "ok"

out=$(c first -H 'Content-Type: application/json' --data-binary @"$cases/seed-no-cluster-nccl-reserve/review.json" "$url/mutate-v1-pod")
check "mutate returns a patch" python3 -c 'import json,sys; r=json.loads(sys.argv[1])["response"]; assert r["allowed"] and r["patch"]' "$out"
expected=$("$bin" review < "$cases/seed-no-cluster-nccl-reserve/review.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["response"]["patch"])')
check "serve and review give the same patch" test "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["response"]["patch"])' "$out")" = "$expected"
c first --data-binary @"$cases/denied-unknown-dtype/review.json" "$url/mutate-v1-pod" >/dev/null

code=$(c first -o /dev/null -w '%{http_code}' --data-binary 'garbage' "$url/mutate-v1-pod")
check "a body that is not an AdmissionReview is HTTP 400" test "$code" = 400
code=$(c first -o /dev/null -w '%{http_code}' "$url/mutate-v1-pod")
check "GET on the mutate path is 405" test "$code" = 405
code=$(c first -o /dev/null -w '%{http_code}' "$url/nope")
check "an unknown path is 404" test "$code" = 404

metrics=$(c first "$url/metrics")
check "metrics count mutated reviews" contains "$metrics" 'podshaper_admission_reviews_total{result="mutated"} 1'
check "metrics count denials" contains "$metrics" 'podshaper_admission_reviews_total{result="denied"} 1'
check "metrics count denials by cause (a bad annotation: input)" contains "$metrics" 'podshaper_admission_denials_total{cause="input"} 1'
check "... every cause from 0" contains "$metrics" 'podshaper_admission_denials_total{cause="shm-cap"} 0'
check "metrics count bad requests" contains "$metrics" 'podshaper_admission_reviews_total{result="bad_request"} 1'
check "metrics have a latency histogram" contains "$metrics" 'podshaper_admission_duration_seconds_bucket{le="+Inf"} 3'

set +e
curl -s --tls-max 1.1 -k "$url/healthz" >/dev/null 2>&1; rc=$?
set -e
check "TLS 1.1 is refused" test $rc -ne 0
check "plain HTTP on the TLS port does not kill the server" bash -c "curl -s -m 3 http://127.0.0.1:$port/healthz >/dev/null; curl -s --cacert $tmp/first.crt $url/healthz | grep -q ok"

cp "$tmp/second.key" "$tmp/tls.key"; cp "$tmp/second.crt" "$tmp/tls.crt"
reloaded=no
for _ in $(seq 60); do
  if c second "$url/healthz" >/dev/null 2>&1; then reloaded=yes; break; fi
  sleep 0.2
done
check "a rotated certificate is served without a restart" test $reloaded = yes
check "the process is the same one" kill -0 "$pid"

kill -TERM "$pid"; set +e; wait "$pid"; rc=$?; set -e; pid=""
check "SIGTERM stops it cleanly" test $rc -eq 0
check "--log-format json: every line is a JSON object with time (UTC), level, logger and msg" python3 - "$tmp/log" <<'PY'
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert lines, "no log lines"
for l in lines:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", l["time"]), l
    assert re.fullmatch(r"podshaper-webhook(\.[a-z-]+)?", l["logger"]) and l["level"] and l["msg"], l
admission = [l for l in lines if l["logger"] == "podshaper-webhook.admission"]
denied = [l for l in admission if l["msg"].startswith("denied")]
assert len(denied) == 1 and denied[0]["object"] == "ml/resnet-0" and denied[0]["uid"], denied
assert "podshaper.io/batch-dtype" in denied[0]["msg"] and "ml/resnet-0" in denied[0]["msg"], denied
shaped = [l for l in admission if l["msg"].startswith("shaped")]
assert len(shaped) == 1 and shaped[0]["level"] == "debug", shaped   # --log-level debug prints debug lines
PY
set +e; "$bin" serve --log-level loud 2>"$tmp/err"; rc=$?; set -e
check "a bad --log-level exits 2, naming the levels" test "$rc $(grep -c 'use trace, debug, info, warn or error' "$tmp/err")" = "2 1"

set +e; "$bin" serve --listen 127.0.0.1:1 --tls-cert "$tmp/missing.crt" --tls-key "$tmp/tls.key" 2>"$tmp/err"; rc=$?; set -e
check "a missing certificate is a clear error" test $rc -ne 0
check "naming the file" grep -q "missing.crt" "$tmp/err"
set +e; "$bin" serve --tls-cert a --tls-key b 2>"$tmp/err"; rc=$?; set -e
check "--listen is required" bash -c "test $rc -eq 2 && grep -q -- '--listen is required' $tmp/err"
set +e; "$bin" serve --listen 127.0.0.1:1 --tls-cert a --tls-key b --read-timeout soon 2>"$tmp/err"; rc=$?; set -e
check "a duration that does not parse is a clear error" bash -c "test $rc -eq 2 && grep -q -- '--read-timeout must be a duration' $tmp/err"
check "the usage explains the shutdown flags" bash -c "'$bin' help | grep -q -- '--shutdown-delay D' && '$bin' help | grep -q -- '--drain-timeout D'"
finish
