"""This container's port 80: 403 and the block page for a blocked name, 200 for any other."""

import http.server

BLOCKED = set(open("/srv/blocked.txt").read().split())


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        name = self.headers.get("Host", "").split(":")[0]
        status, body = (403, f"BLOCKED {name}\n") if name in BLOCKED else (200, f"welcome to {name}\n")
        self.send_response(status)
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


http.server.ThreadingHTTPServer(("", 80), Page).serve_forever()
