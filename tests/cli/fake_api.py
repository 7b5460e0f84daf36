#!/usr/bin/env python3
"""A fake Kubernetes API server (plain HTTP, anonymous) with just what
`podshaper-agent run` asks: its Node, its GPUTopologyReport (get, create,
replace) and its own Pod.

    fake_api.py STATE_DIR

Prints the port it listens on, then serves until killed. STATE_DIR holds:
  node.json    the Node (GET /api/v1/nodes/NAME, any NAME); absent: 404
  pod.json     the agent's Pod (GET /api/v1/namespaces/NS/pods/NAME); absent: 404
  report.json  the GPUTopologyReport, as the agent last wrote it
  requests     one line per request: METHOD PATH
"""
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

state = sys.argv[1]
REPORTS = "/apis/podshaper.io/v1alpha1/gputopologyreports"


def path(name):
    return os.path.join(state, name)


def read(name):
    try:
        with open(path(name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def not_found(self):
        self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                         "code": 404, "message": f"{self.path} not found"})

    def body(self):
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def record(self):
        with open(path("requests"), "a") as f:
            f.write(f"{self.command} {self.path.split('?')[0]}\n")

    def do_GET(self):
        self.record()
        p = self.path.split("?")[0]
        if re.fullmatch(r"/api/v1/nodes/[^/]+", p):
            obj = read("node.json")
        elif re.fullmatch(r"/api/v1/namespaces/[^/]+/pods/[^/]+", p):
            obj = read("pod.json")
        elif p.startswith(REPORTS + "/"):
            obj = read("report.json")
        else:
            obj = None
        self.reply(200, obj) if obj is not None else self.not_found()

    def store(self, code):
        self.record()
        report = self.body()
        report.setdefault("metadata", {})["resourceVersion"] = str(os.getpid())
        with open(path("report.json.tmp"), "w") as f:
            json.dump(report, f)
        os.replace(path("report.json.tmp"), path("report.json"))
        self.reply(code, report)

    def do_POST(self):
        self.store(201)

    def do_PUT(self):
        self.store(200)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
