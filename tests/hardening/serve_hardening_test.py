#!/usr/bin/env python3
"""`podshaper-webhook serve` against hostile clients, faults and load.

Usage: serve_hardening_test.py PODSHAPER_WEBHOOK ROOT

Starts the real binary on free ports with throwaway certificates and checks:
oversized and deeply nested AdmissionReviews, slow-loris (trickling and silent
connections) while a normal client is measured, TLS garbage and refused
protocol versions and ciphers, the TLS 1.2 ciphers actually accepted, no session
resumption, weak certificates refused, bounded memory, nothing sensitive in
/metrics, /healthz, /readyz or error responses, and a graceful SIGTERM (alone
and with a second replica on the same port) that loses no request.

Each check prints one line ("ok: ..." or "FAIL: ..."), like tests/cli/lib.sh;
any failure exits 1. Python 3 standard library only.
"""

import http.client
import json
import multiprocessing
import os
import re
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1]
# Built for make test-sanitize: memory numbers are ASan's, not the server's.
SANITIZED = "libasan" in subprocess.run(["ldd", BIN], capture_output=True, text=True).stdout
ROOT = sys.argv[2]
CASES = os.path.join(ROOT, "tests/golden/cases")

READ_TIMEOUT = 2        # --read-timeout: the trickling and silent attackers are cut after it
BODY_LIMIT = 3 * 1024 * 1024  # ServerOptions::maxBodyBytes, which serve keeps
SHUTDOWN_DELAY = 1      # --shutdown-delay for the SIGTERM checks

failures = 0


def check(what, ok, detail=""):
    global failures
    line = what + (f" ({detail})" if detail else "")
    if ok:
        print(f"ok: {line}", flush=True)
    else:
        failures += 1
        print(f"FAIL: {line}", file=sys.stderr, flush=True)


def info(text):
    print(f"   {text}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def p99(samples):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def ms(seconds):
    return f"{seconds * 1000:.1f} ms"


# --- certificates and the server -------------------------------------------------------

def make_cert(tmp, name, key_args):
    key, crt = os.path.join(tmp, f"{name}.key"), os.path.join(tmp, f"{name}.crt")
    subprocess.run(["openssl", "req", "-x509", "-newkey", *key_args, "-nodes", "-days", "1",
                    "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    return crt, key


class Server:
    """One `podshaper-webhook serve` process."""

    def __init__(self, tmp, name, port, crt, key, extra=()):
        self.name, self.port, self.crt = name, port, crt
        self.log_path = os.path.join(tmp, f"{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--listen", f"127.0.0.1:{port}", "--tls-cert", crt, "--tls-key", key,
             *extra], stdout=self.log, stderr=subprocess.STDOUT)

    def wait_healthy(self, limit=10):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                status, _, _ = get(self.port, "/healthz")
                if status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def wait_serving(self, limit=10):
        """Until its log says it serves (a second replica on a shared port: the
        port answering says nothing about this process)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline and self.proc.poll() is None:
            if " serving on " in self.log_text():
                return True
            time.sleep(0.05)
        return False

    def memory(self):
        """VmRSS and VmHWM in KiB."""
        values = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    values[line.split(":")[0]] = int(line.split()[1])
        return values["VmRSS"], values["VmHWM"]

    def stop(self, sig=signal.SIGTERM, limit=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def log_text(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()


def client_context(cafile=None):
    if cafile:
        return ssl.create_default_context(cafile=cafile)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


INSECURE = client_context()


def connection(port, timeout=10):
    return http.client.HTTPSConnection("127.0.0.1", port, context=INSECURE, timeout=timeout)


def get(port, path):
    conn = connection(port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def metric(port, name):
    _, _, body = get(port, "/metrics")
    match = re.search(rf"^{re.escape(name)} (\S+)$", body.decode(), re.M)
    return float(match.group(1)) if match else None


# --- AdmissionReviews ------------------------------------------------------------------

with open(os.path.join(CASES, "seed-no-cluster-nccl-reserve/review.json")) as f:
    BASE_REVIEW = json.load(f)


def review(uid="hardening", annotation_bytes=0, spec_extra=None):
    r = json.loads(json.dumps(BASE_REVIEW))
    r["request"]["uid"] = uid
    if annotation_bytes:
        r["request"]["object"]["metadata"]["annotations"]["example.com/blob"] = "x" * annotation_bytes
    body = json.dumps(r)
    if spec_extra is not None:  # raw JSON text spliced into the pod spec
        marker = '"spec": {'
        at = body.index(marker, body.index('"object"')) + len(marker)
        body = body[:at] + '"x-extra": ' + spec_extra + ", " + body[at:]
    return body.encode()


def review_of_size(size):
    small = len(review())
    return review(uid="near-limit", annotation_bytes=size - small - len(',"example.com/blob": ""'))


def post_review(conn, body):
    conn.request("POST", "/mutate-v1-pod", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, dict(resp.getheaders()), resp.read()


def raw_tls(port, timeout=10):
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return INSECURE.wrap_socket(sock)


def read_http_response(sock, limit=10, data=b""):
    """Status, headers and body of one response on a raw socket (`data`: what
    was read of it already), and whether the server closed the connection after it."""
    sock.settimeout(limit)
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    try:
        closed = sock.recv(1) == b""
    except (ssl.SSLError, OSError):
        closed = True
    return status, headers, body, closed


TRACE = re.compile(r"what\(\)|terminate called|Traceback|\.cc:\d+|\.h:\d+|std::|boost::|"
                   r"0x[0-9a-f]{8,}|^#\d+ ", re.M)
error_bodies = []  # (what, body) of every error response seen, checked at the end


# --- the attacker (its own process, so that it does not take the client's GIL) --------

SLOW_HEADER = (b"POST /mutate-v1-pod HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"X-Slow: " + b"a" * 100000)


def attacker(port, trickling, silent, stop, out):
    """Keeps `trickling` TLS connections sending a request header a byte a second
    and `silent` TCP connections that never send a TLS hello. Each one the server
    cuts off is timed (from its first byte, or from its connect) and replaced."""
    ctx = client_context()
    conns = {}  # fd -> [socket, kind, started, bytes sent]
    poller = select.poll()
    cut = {"trickle": [], "silent": []}
    replace = []  # kinds to open again; a few per turn, so that cut-offs are timed promptly
    errors = []

    def open_one(kind):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if kind == "trickle":
                sock = ctx.wrap_socket(sock)
                sock.sendall(SLOW_HEADER[:1])
            sock.setblocking(False)
        except OSError as e:
            errors.append(f"{kind}: {e}")
            return
        conns[sock.fileno()] = [sock, kind, time.monotonic(), 1]
        poller.register(sock.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)

    def drop(fd):
        sock, kind, started, _ = conns.pop(fd)
        poller.unregister(fd)
        cut[kind].append(time.monotonic() - started)
        sock.close()
        replace.append(kind)

    for _ in range(trickling):
        open_one("trickle")
    for _ in range(silent):
        open_one("silent")
    out.put(("ready", len(conns), errors[:3]))
    next_tick = time.monotonic() + 1
    while not stop.is_set():
        for fd, _ in poller.poll(100):
            if fd not in conns:
                continue
            sock = conns[fd][0]
            try:
                data = sock.recv(4096)  # the server has nothing to say to these: EOF or an error
            except (ssl.SSLWantReadError, BlockingIOError):
                continue
            except OSError:
                data = b""
            if not data or conns[fd][1] == "silent":
                drop(fd)
        for _ in range(min(5, len(replace))):
            open_one(replace.pop(0))
        if time.monotonic() >= next_tick:
            next_tick += 1
            for fd, entry in list(conns.items()):
                if entry[1] != "trickle":
                    continue
                try:
                    entry[0].send(SLOW_HEADER[entry[3]:entry[3] + 1])
                    entry[3] += 1
                except (ssl.SSLWantWriteError, BlockingIOError):
                    pass
                except OSError:
                    drop(fd)
    open_now = len(conns)
    for sock, *_ in conns.values():
        sock.close()
    out.put(("done", cut, open_now, errors[:3]))


# --- hand-made ClientHellos ------------------------------------------------------------

def vec16(data):
    return struct.pack(">H", len(data)) + data


def extension(kind, data):
    return struct.pack(">H", kind) + vec16(data)


def client_hello(version, ciphers):
    """A TLS ClientHello record offering `version` (no supported_versions extension,
    so no TLS 1.3) and `ciphers`, with the extensions an ECDHE handshake needs."""
    suites = b"".join(struct.pack(">H", c) for c in ciphers)
    exts = (extension(0x000A, vec16(struct.pack(">HHH", 0x001D, 0x0017, 0x0018)))  # groups
            + extension(0x000B, b"\x01\x00")  # ec_point_formats: uncompressed
            + extension(0x000D, vec16(struct.pack(">8H", 0x0403, 0x0804, 0x0401, 0x0503,
                                                   0x0805, 0x0501, 0x0201, 0x0203))))  # sigalgs
    body = (struct.pack(">H", version) + os.urandom(32) + b"\x00" + vec16(suites) + b"\x01\x00"
            + vec16(exts))
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + vec16(handshake)


def tls_exchange(port, data, wait=READ_TIMEOUT + 2):
    """Sends raw bytes; returns what came back and whether the server closed."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=wait)
    received, closed = b"", False
    try:
        sock.sendall(data)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            received += chunk
            if received[:1] == b"\x16" and len(received) > 5:
                break  # a handshake answer: enough to know it was accepted
    except socket.timeout:
        pass
    except OSError:
        closed = True
    finally:
        sock.close()
    return received, closed


def describe_tls_answer(received):
    if received[:1] == b"\x15" and len(received) >= 7:
        return f"alert {received[6]}"
    if received[:1] == b"\x16" and len(received) >= 6 and received[5] == 2:
        # record header 5, handshake header 4, version 2, random 32, then the session id
        at = 44 + received[43] if len(received) > 43 else len(received)
        if len(received) >= at + 2:
            return "ServerHello, cipher 0x%04x" % struct.unpack(">H", received[at:at + 2])[0]
        return "ServerHello"
    return f"{len(received)} bytes"


AEAD_ECDHE = [0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8]
CBC_RC4_3DES = [0xC009, 0xC013, 0xC00A, 0xC014, 0xC023, 0xC027, 0xC024, 0xC028, 0x002F, 0x0035,
                0x003C, 0x0005, 0x0004, 0x000A, 0xC012, 0xC008]
MOZILLA_INTERMEDIATE_TLS12 = {
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    "DHE-RSA-AES128-GCM-SHA256", "DHE-RSA-AES256-GCM-SHA384", "DHE-RSA-CHACHA20-POLY1305"}


def accepted_tls12_ciphers(port):
    """Every cipher this OpenSSL knows, offered alone over TLS 1.2: those the server takes."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    probe.set_ciphers("ALL:COMPLEMENTOFALL:@SECLEVEL=0")
    names = sorted({c["name"] for c in probe.get_ciphers() if c["protocol"] != "TLSv1.3"})
    accepted = []
    for name in names:
        ctx = client_context()
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.set_ciphers(f"{name}:@SECLEVEL=0")
        except ssl.SSLError:
            continue
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw) as s:
                    accepted.append(s.cipher()[0])
        except (ssl.SSLError, OSError):
            pass
    return names, accepted


# --- a stream of reviews, for the SIGTERM checks ---------------------------------------

class ReviewStream:
    """Client threads sending reviews back to back over kept-alive connections, as
    the API server does, reconnecting when told Connection: close. A request whose
    bytes went out and got no answer is lost; a connect that fails is not (no
    request was sent: with one replica gone there is nobody to send it to)."""

    def __init__(self, port, threads=4):
        self.port = port
        self.answered = []       # (time, thread) of each 200 with the right uid
        self.lost = []           # (time, error) of requests sent and not answered
        self.connect_failed = []  # (time, error)
        self.closes = []         # times of responses that said Connection: close
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(30)

    def run(self, index):
        conn = connection(self.port, timeout=10)
        n = 0
        while not self.stopping.is_set():
            if conn.sock is None:
                try:
                    conn.connect()
                except OSError as e:
                    with self.lock:
                        self.connect_failed.append((time.monotonic(), repr(e)))
                    conn.close()
                    if self.stopping.wait(0.05):
                        break
                    continue
            n += 1
            uid = f"stream-{index}-{n}"
            try:
                status, headers, body = post_review(conn, review(uid=uid))
                ok = status == 200 and json.loads(body)["response"]["uid"] == uid
                with self.lock:
                    if ok:
                        self.answered.append((time.monotonic(), index))
                    else:
                        self.lost.append((time.monotonic(), f"HTTP {status}"))
                    if headers.get("Connection", "").lower() == "close":
                        self.closes.append(time.monotonic())
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.lost.append((time.monotonic(), repr(e)))
                conn.close()
        conn.close()


# --- the checks ------------------------------------------------------------------------

def main():
    tmp = tempfile.mkdtemp(prefix="podshaper-hardening-")
    servers = []
    try:
        run_checks(tmp, servers)
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.stop(signal.SIGKILL)
        subprocess.run(["rm", "-rf", tmp])
    if failures:
        print(f"{failures} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


def run_checks(tmp, servers):
    began = time.monotonic()
    crt, key = make_cert(tmp, "ec", ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
    port = free_port()
    server = Server(tmp, "main", port, crt, key,
                    ["--read-timeout", f"{READ_TIMEOUT}s", "--idle-timeout", "30s",
                     "--shutdown-delay", f"{SHUTDOWN_DELAY}s", "--drain-timeout", "5s"])
    servers.append(server)
    check("serve starts with --read-timeout, --idle-timeout, --shutdown-delay, --drain-timeout",
          server.wait_healthy())
    if server.proc.poll() is not None:
        print(server.log_text(), file=sys.stderr)
        return
    rss0, hwm0 = server.memory()

    # Baseline latency, before any attack.
    def measure(label):
        """Latencies of 200 reviews on one kept-alive connection and of 50 each on a
        new connection (its TLS handshake included); a failed review counts as 10 s."""
        keep = connection(port)
        kept, fresh, failed = [], [], 0
        for i in range(250):
            conn = keep if i < 200 else connection(port)
            t = time.monotonic()
            try:
                status, _, _ = post_review(conn, review(uid=f"{label}-{i}"))
            except (OSError, http.client.HTTPException):
                status = 0
                conn.close()
            took = time.monotonic() - t if status == 200 else 10.0
            failed += status != 200
            (kept if i < 200 else fresh).append(took)
            if conn is not keep:
                conn.close()
        keep.close()
        return kept, fresh, failed

    base_kept, base_fresh, base_failed = measure("baseline")
    check("baseline: 250 reviews answered", base_failed == 0, f"{base_failed} failed")

    # Bodies: over the limit, just under it, deeply nested.
    huge = review(uid="huge", annotation_bytes=4 * 1024 * 1024)
    sock = raw_tls(port)
    sock.sendall(b"POST /mutate-v1-pod HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(huge))
    sent, answer = 0, b""
    sock.setblocking(False)
    while sent < len(huge):  # the whole body, as a real client would, until the answer comes
        readable, writable, _ = select.select([sock], [sock], [], 5)
        if not readable and not writable:
            break
        if readable:
            try:
                answer = sock.recv(65536)
                break
            except (ssl.SSLWantReadError, BlockingIOError):
                pass  # a TLS record that is not data (a TLS 1.3 session ticket)
            except OSError:
                break
        if writable:
            try:
                sent += sock.send(huge[sent:sent + 65536])
            except (ssl.SSLWantWriteError, BlockingIOError):
                pass
            except OSError:
                break
    sock.setblocking(True)
    try:
        status, headers, body, closed = read_http_response(sock, data=answer)
    except OSError as e:
        status, headers, body, closed = 0, {}, repr(e).encode(), True
    sock.close()
    error_bodies.append(("413", body))
    check("a 4 MiB AdmissionReview is HTTP 413 saying why",
          status == 413 and b"larger than" in body,
          f"{len(huge)} bytes, {sent} sent before the answer; HTTP {status}: {body.decode(errors='replace').strip()}")
    check("... and the connection is closed", closed and headers.get("connection") == "close")

    near = review_of_size(BODY_LIMIT - 1024)
    conn = connection(port, timeout=30)
    t = time.monotonic()
    status, _, body = post_review(conn, near)
    took = time.monotonic() - t
    conn.close()
    answered = status == 200 and json.loads(body)["response"]["uid"] == "near-limit"
    check("a valid AdmissionReview just under the body limit is answered", answered,
          f"{len(near)} bytes, HTTP {status} in {ms(took)}")

    deep = review(uid="deep", spec_extra="[" * 100000 + "]" * 100000)
    conn = connection(port)
    status, _, body = post_review(conn, deep)
    conn.close()
    error_bodies.append(("deep", body))
    check("an AdmissionReview nested 100,000 deep is HTTP 400 saying why",
          status == 400 and b"nested deeper than" in body,
          f"HTTP {status}: {body.decode(errors='replace').strip()}")
    deep_objects = review(uid="deep2", spec_extra='{"a":' * 50000 + "1" + "}" * 50000)
    conn = connection(port)
    status2, _, body2 = post_review(conn, deep_objects)
    conn.close()
    error_bodies.append(("deep objects", body2))
    check("... and so is one of 50,000 nested objects", status2 == 400 and b"nested" in body2,
          f"HTTP {status2}")
    check("the server is still up after them", get(port, "/healthz")[0] == 200)
    rss_bodies, hwm_bodies = server.memory()

    # Other bad HTTP, for the error-body checks at the end.
    for what, raw in [("malformed", b"NOT A REQUEST\r\n\r\n"),
                      ("header too large", b"GET /healthz HTTP/1.1\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n")]:
        s = raw_tls(port)
        s.sendall(raw)
        st, _, b, _ = read_http_response(s)
        s.close()
        error_bodies.append((what, b))
    for method, path in [("GET", "/mutate-v1-pod"), ("GET", "/nope"), ("POST", "/mutate-v1-pod")]:
        conn = connection(port)
        conn.request(method, path, body=b"garbage" if method == "POST" else None)
        resp = conn.getresponse()
        error_bodies.append((f"{method} {path}", resp.read()))
        conn.close()

    # Slow-loris while a normal client is measured.
    def slowloris(label):
        stop = multiprocessing.Event()
        out = multiprocessing.Queue()
        attack = multiprocessing.Process(target=attacker, args=(port, 200, 200, stop, out))
        attack.start()
        _, opened, attack_errors = out.get(timeout=60)
        attack_began = time.monotonic()
        time.sleep(0.5)
        active = metric(port, "podshaper_http_connections_active")
        kept, fresh, failed = measure(label)
        # Long enough for every attacker to be cut off at least once.
        time.sleep(max(0.0, attack_began + READ_TIMEOUT * 2 + 1.5 - time.monotonic()))
        stop.set()
        _, cut, _, more_errors = out.get(timeout=60)
        attack.join(10)
        return opened, active, attack_errors + more_errors, kept, fresh, failed, cut

    opened, active, attack_errors, att_kept, att_fresh, att_failed, cut = slowloris("attack")
    check("the attack holds its connections open", opened == 400 and active is not None and active >= 350,
          f"{opened} opened, podshaper_http_connections_active {active}; {attack_errors}")
    info(f"p99 of 200 reviews on a kept-alive connection: {ms(p99(base_kept))} without the attack, "
         f"{ms(p99(att_kept))} under it (max {ms(max(att_kept))})")
    info(f"p99 of 50 reviews each on a new connection: {ms(p99(base_fresh))} without the attack, "
         f"{ms(p99(att_fresh))} under it (max {ms(max(att_fresh))})")
    check("under slow-loris (200 trickling + 200 silent connections) reviews are answered quickly",
          p99(att_kept) < 0.2 and p99(att_fresh) < 0.2 and att_failed == 0,
          f"{att_failed} failed; p99 {ms(p99(att_kept))} kept-alive, {ms(p99(att_fresh))} new connections; bound 200 ms")
    for kind, n in [("trickle", 200), ("silent", 200)]:
        times = sorted(cut[kind])
        lo, hi = (times[0], times[-1]) if times else (0, 0)
        check(f"{'trickling' if kind == 'trickle' else 'silent'} connections are cut off at the read timeout",
              len(times) >= n and READ_TIMEOUT - 0.1 <= lo and hi <= READ_TIMEOUT + 1.5,
              f"{len(times)} cut after {lo:.2f} s to {hi:.2f} s, --read-timeout {READ_TIMEOUT}s")
    check("the server is still up after the attack", get(port, "/healthz")[0] == 200)
    # The gauge goes down when a connection's session is destroyed: a session
    # kept alive by a forgotten reference would stay counted.
    def sessions_left():
        deadline, left = time.monotonic() + 5, None
        while time.monotonic() < deadline:
            left = metric(port, "podshaper_http_connections_active")
            if left == 1:  # the one asking
                break
            time.sleep(0.1)
        return left

    left = sessions_left()
    check("after the attack every connection's session is gone", left == 1,
          f"podshaper_http_connections_active {left}")
    rss1, hwm1 = server.memory()
    # The same again: memory a connection or a request left behind would add up
    # (a session is about 72 KiB, and an attack closes over 500 of them; the
    # allocator settles a few MiB higher on the second run, then stays).
    _, _, _, again_kept, again_fresh, again_failed, _ = slowloris("again")
    rss2, hwm2 = server.memory()
    check("a second slow-loris attack: reviews still answered quickly, and no more memory",
          again_failed == 0 and p99(again_kept) < 0.2 and p99(again_fresh) < 0.2
          and (SANITIZED or hwm2 - hwm1 < 16 * 1024),  # ASan's quarantine: see the bound below
          f"p99 {ms(p99(again_kept))} / {ms(p99(again_fresh))}; peak {hwm1 / 1024:.1f} -> {hwm2 / 1024:.1f} MiB")

    # TLS: garbage and refused hellos, each one handshake error, the server serving on.
    # First the second attack's connections must be gone: a silent one cut off late
    # would count a handshake error among these.
    left = sessions_left()
    check("after the second attack every connection's session is gone", left == 1,
          f"podshaper_http_connections_active {left}")
    errors_before = metric(port, "podshaper_tls_handshake_errors_total")
    attempts = [
        ("random bytes", os.urandom(1024), None),
        ("a truncated ClientHello", client_hello(0x0303, AEAD_ECDHE)[:60], None),
        ("an HTTP request in clear text", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", None),
        ("a TLS 1.0 hello", client_hello(0x0301, AEAD_ECDHE + CBC_RC4_3DES), 70),
        ("a TLS 1.1 hello", client_hello(0x0302, AEAD_ECDHE + CBC_RC4_3DES), 70),
        ("a TLS 1.2 hello with only CBC, RC4 and 3DES ciphers", client_hello(0x0303, CBC_RC4_3DES), 40),
        ("a TLS 1.2 hello with only RSA key exchange (AES-GCM)", client_hello(0x0303, [0x009C, 0x009D]), 40),
    ]
    results = []
    lock = threading.Lock()

    def attempt(what, data, alert):
        received, closed = tls_exchange(port, data)
        with lock:
            results.append((what, received, closed, alert))

    workers = [threading.Thread(target=attempt, args=a) for a in attempts]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for what, received, closed, alert in sorted(results, key=lambda r: [a[0] for a in attempts].index(r[0])):
        answer = describe_tls_answer(received)
        if alert is None:
            ok = closed and b"ok" not in received and not received.startswith(b"\x16")
        else:
            ok = closed and received[:1] == b"\x15" and len(received) >= 7 and received[6] == alert
        check(f"{what}: refused, the connection closed", ok,
              f"{answer}{'; closed' if closed else '; NOT closed'}")
    check("the server is still serving after them", get(port, "/healthz")[0] == 200)
    errors_after = metric(port, "podshaper_tls_handshake_errors_total")
    check("podshaper_tls_handshake_errors_total counts each of them",
          errors_after is not None and errors_before is not None
          and errors_after - errors_before == len(attempts),
          f"{errors_before:.0f} -> {errors_after:.0f}, {len(attempts)} attempts")
    # The refusals above prove something only if a good hello made the same way is served.
    control, _ = tls_exchange(port, client_hello(0x0303, AEAD_ECDHE))
    check("control: the same hand-made TLS 1.2 hello with ECDHE AEAD ciphers gets a ServerHello",
          control[:1] == b"\x16" and len(control) > 5 and control[5] == 2, describe_tls_answer(control))

    # No session resumption (tickets or cache), TLS 1.2 and 1.3.
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = client_context()
        ctx.minimum_version = ctx.maximum_version = version
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5)) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while s.recv(4096):
                pass
            session = s.session
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                             session=session) as s:
            reused = s.session_reused
        check(f"{version.name}: a session is not resumed", not reused and not session.has_ticket,
              f"ticket {session.has_ticket}, reused {reused}")

    # Which TLS 1.2 ciphers an RSA certificate is served with: Mozilla "intermediate", no
    # RSA key exchange. (RSA, because with an EC key RSA key exchange cannot happen anyway.)
    rsa_crt, rsa_key = make_cert(tmp, "rsa", ["rsa:2048"])
    rsa_port = free_port()
    rsa = Server(tmp, "rsa", rsa_port, rsa_crt, rsa_key)
    servers.append(rsa)
    if rsa.wait_healthy():
        offered, accepted = accepted_tls12_ciphers(rsa_port)
        check("TLS 1.2 with an RSA certificate: only ECDHE-RSA AEAD ciphers of Mozilla's intermediate profile",
              accepted and set(accepted) <= MOZILLA_INTERMEDIATE_TLS12
              and all(c.startswith("ECDHE-RSA-") for c in accepted),
              f"{len(offered)} offered one by one, accepted: {', '.join(accepted)}")
        offered, accepted = accepted_tls12_ciphers(port)
        check("TLS 1.2 with an ECDSA certificate: only ECDHE-ECDSA AEAD ciphers of that profile",
              accepted and set(accepted) <= MOZILLA_INTERMEDIATE_TLS12,
              f"accepted: {', '.join(accepted)}")
    else:
        check("serve starts with an RSA-2048 certificate", False, rsa.log_text()[-500:])
    rsa.stop()

    weak_crt, weak_key = make_cert(tmp, "weak", ["rsa:1024"])
    weak = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{free_port()}", "--tls-cert", weak_crt,
                             "--tls-key", weak_key], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        weak_out, _ = weak.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        weak.kill()
        weak_out = "still serving after 10 s: " + weak.communicate()[0][-200:]
    check("a certificate with a 1024-bit RSA key is refused at start, naming the file and why",
          weak.returncode == 2 and weak_crt in weak_out and "2048" in weak_out,
          weak_out.strip().splitlines()[-1] if weak_out.strip() else f"rc {weak.returncode}")

    # Memory over everything above. (tcmalloc keeps what it has freed, so VmRSS
    # stays near the peak: the second attack above is the check for leaks.)
    rss3, hwm3 = server.memory()
    info(f"memory (VmRSS/VmHWM): {rss0 / 1024:.1f}/{hwm0 / 1024:.1f} MiB at start, "
         f"{rss_bodies / 1024:.1f}/{hwm_bodies / 1024:.1f} after the big bodies, "
         f"{rss1 / 1024:.1f}/{hwm1 / 1024:.1f} after slow-loris, {rss2 / 1024:.1f}/{hwm2 / 1024:.1f} after "
         f"it again, {rss3 / 1024:.1f}/{hwm3 / 1024:.1f} at the end")
    if SANITIZED:
        # ASan holds freed memory in its quarantine (256 MiB by default) and pads every
        # block, so RSS says nothing about the server here; the plain build checks the
        # bound, and LeakSanitizer checks at exit that nothing was lost.
        info(f"memory bound not checked under AddressSanitizer (peak +{(hwm3 - rss0) / 1024:.1f} MiB)")
    else:
        check("memory stays bounded: peak under start + 64 MiB", hwm3 - rss0 < 64 * 1024,
              f"peak +{(hwm3 - rss0) / 1024:.1f} MiB")

    # Nothing sensitive in what anyone may read.
    with open(key) as f:
        key_pem = f.read()
    with open(crt) as f:
        crt_pem = f.read()
    secrets = ["-----BEGIN", "PRIVATE KEY"] + [l for l in key_pem.splitlines() if len(l) > 40] \
        + [l for l in crt_pem.splitlines() if len(l) > 40][1:3]
    for path in ("/metrics", "/healthz", "/readyz"):
        status, headers, body = get(port, path)
        text = body.decode(errors="replace") + json.dumps(headers)
        leaked = [s[:20] for s in secrets if s in text]
        check(f"{path} shows no key or certificate material", status == 200 and not leaked and not TRACE.search(text),
              f"HTTP {status}, {len(body)} bytes" + (f", leaked {leaked}" if leaked else ""))
    traces = [(w, b[:80]) for w, b in error_bodies if TRACE.search(b.decode(errors="replace"))]
    long_ones = [(w, len(b)) for w, b in error_bodies if len(b) > 300]
    check("error responses are one short line, with no stack trace or source location",
          not traces and not long_ones and len(error_bodies) >= 8,
          f"{len(error_bodies)} error bodies, e.g. " + "; ".join(
              f"{w}: {b.decode(errors='replace').strip()[:60]}" for w, b in error_bodies[:4]))
    log = server.log_text()
    check("the server's log holds no key material", not [s for s in secrets[2:] if s in log])

    token_checks(tmp, crt, key, servers)

    # SIGTERM while reviews stream in: none lost, /readyz 503 at once, exit 0.
    stream = ReviewStream(port)
    stream.start()
    time.sleep(0.5)
    before = len(stream.answered)
    term_at = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.1)
    ready_status, _, ready_body = get(port, "/readyz")
    check("after SIGTERM /readyz is 503 at once, while serving goes on",
          ready_status == 503, f"HTTP {ready_status}: {ready_body.decode(errors='replace').strip()}")
    try:
        rc = server.proc.wait(SHUTDOWN_DELAY + 10)
    except subprocess.TimeoutExpired:
        rc = None
    exited = time.monotonic() - term_at
    time.sleep(0.2)
    stream.stop()
    after_term = [t for t, _ in stream.answered if t > term_at]
    info(f"SIGTERM: {before} reviews answered before it, {len(after_term)} after it "
         f"({len([t for t in stream.closes if t > term_at])} with Connection: close), exit after {exited:.2f} s")
    check("SIGTERM during a stream of reviews loses none",
          not stream.lost and after_term, f"{len(stream.lost)} lost {stream.lost[:3]}")
    check("... they were answered through the --shutdown-delay, each with Connection: close",
          after_term and max(after_term) - term_at >= SHUTDOWN_DELAY - 0.2
          and len([t for t in stream.closes if t > term_at + 0.05]) >= len([t for t in after_term if t > term_at + 0.05]),
          f"last answer {max(after_term) - term_at:.2f} s after SIGTERM" if after_term else "none")
    check("... then the port is closed (connections refused)",
          any(t > term_at + SHUTDOWN_DELAY - 0.2 for t, _ in stream.connect_failed))
    check("... and it exits 0 soon after the delay", rc == 0 and exited < SHUTDOWN_DELAY + 3,
          f"rc {rc} after {exited:.2f} s")

    two_replicas(tmp, crt, key, servers)
    info(f"took {time.monotonic() - began:.1f} s")


def token_checks(tmp, crt, key, servers):
    """With a kubeconfig holding a bearer token (an API server that is not there),
    the token shows up nowhere: not in /metrics, /healthz, /readyz, not in the log."""
    token = "podshaper-hardening-token-" + os.urandom(8).hex()
    kubeconfig = os.path.join(tmp, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: nowhere
  cluster: {{server: "https://127.0.0.1:{free_port()}", insecure-skip-tls-verify: true}}
users:
- name: u
  user: {{token: {token}}}
contexts:
- name: c
  context: {{cluster: nowhere, user: u}}
current-context: c
""")
    port = free_port()
    s = Server(tmp, "token", port, crt, key, ["--kubeconfig", kubeconfig])
    servers.append(s)
    if not s.wait_healthy():
        check("serve starts with a kubeconfig", False, s.log_text()[-500:])
        return
    time.sleep(1.0)  # a few failed list calls, and their log lines
    seen = []
    for path in ("/metrics", "/healthz", "/readyz"):
        status, headers, body = get(port, path)
        if token in body.decode(errors="replace") + json.dumps(headers):
            seen.append(path)
    ready = get(port, "/readyz")
    rc = s.stop()
    log = s.log_text()
    check("with a kubeconfig's bearer token: not in /metrics, /healthz, /readyz or the log",
          not seen and token not in log and "Bearer" not in log,
          f"/readyz HTTP {ready[0]} ({ready[2].decode(errors='replace').strip()}); {len(log)} bytes of log"
          + (f"; token in {seen}" if seen else ""))
    check("... and that server stops cleanly on SIGTERM", rc == 0, f"rc {rc}")


def two_replicas(tmp, crt, key, servers):
    """Two replicas on one port (SO_REUSEPORT); one gets SIGTERM mid-stream: every
    review is answered, by one or the other, and no connect fails."""
    port = free_port()
    flags = ["--shutdown-delay", f"{SHUTDOWN_DELAY}s", "--drain-timeout", "5s"]
    a = Server(tmp, "replica-a", port, crt, key, flags)
    servers.append(a)
    ok_a = a.wait_healthy() and a.wait_serving()
    b = Server(tmp, "replica-b", port, crt, key, flags)
    servers.append(b)
    ok_b = b.wait_serving()
    check("two replicas listen on the same port", ok_a and ok_b and a.proc.poll() is None
          and b.proc.poll() is None, b.log_text().strip().splitlines()[-1] if not ok_b else "")
    if not (ok_a and ok_b):
        return
    stream = ReviewStream(port)
    stream.start()
    time.sleep(0.5)
    term_at = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    try:
        rc = a.proc.wait(SHUTDOWN_DELAY + 10)
    except subprocess.TimeoutExpired:
        rc = None
    time.sleep(0.5)
    stream.stop()
    after = [t for t, _ in stream.answered if t > term_at]
    check("one of two replicas stopped mid-stream: every review answered, no connect failed",
          not stream.lost and not stream.connect_failed and after and rc == 0,
          f"{len(stream.answered)} answered ({len(after)} after SIGTERM), {len(stream.lost)} lost, "
          f"{len(stream.connect_failed)} connects failed {stream.connect_failed[:2]}, rc {rc}")
    b.stop()


if __name__ == "__main__":
    sys.exit(main())
