#!/usr/bin/env python3
"""A stand-in orders service for order.lua and http.lua (standard library only).

    python3 examples/orders.py [COMMAND ...]

It answers GET /orders/{id} on 127.0.0.1:8090 (weftd's API has 8080) with the
order as JSON, and 404 for an order it does not have. With a COMMAND it serves
while the command runs and exits with the command's status:

    python3 examples/orders.py weft run examples/order.lua --input '{"id":7}'

Without one it serves until interrupted, for workflows run under weftd.
"""
import http.server
import json
import subprocess
import sys
import threading

ADDRESS = ("127.0.0.1", 8090)
ORDERS = {"7": {"id": 7, "item": "tea", "qty": 3, "unit": 25}}


class Orders(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?")[0].strip("/").split("/")
        order = ORDERS.get(path[1]) if len(path) == 2 and path[0] == "orders" else None
        body = json.dumps(order or {"error": "no order at " + self.path}).encode()
        self.send_response(200 if order else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        if not self.server.quiet:  # the command's own output stays its own
            super().log_message(*args)


def main():
    try:
        server = http.server.ThreadingHTTPServer(ADDRESS, Orders)
    except OSError as e:
        sys.exit("orders.py: cannot listen on %s:%d: %s" % (ADDRESS + (e.strerror,)))
    server.quiet = len(sys.argv) > 1
    if not server.quiet:
        print("orders.py: serving http://%s:%d/orders/{id}" % ADDRESS, file=sys.stderr)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            return 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return subprocess.call(sys.argv[1:])
    except OSError as e:
        sys.exit("orders.py: cannot run %s: %s" % (sys.argv[1], e.strerror))


if __name__ == "__main__":
    sys.exit(main())
