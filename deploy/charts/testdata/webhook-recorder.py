#!/usr/bin/env python3
"""An Alertmanager webhook receiver for the chart's alerting test: appends every POSTed JSON body
as one line to --out, and writes the port it listens on (loopback) to --port-file."""
import argparse
import http.server
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--port-file", required=True)
args = parser.parse_args()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        payload = json.loads(body)
        with open(args.out, "a") as f:
            f.write(json.dumps(payload) + "\n")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *_):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.replace(args.port_file + ".tmp", args.port_file)
server.serve_forever()
