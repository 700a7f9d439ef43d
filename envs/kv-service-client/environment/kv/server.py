"""A tiny read-only key-value service: GET /health, GET /key/<name>."""

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DATA = {"release": "aurora-7", "channel": "stable"}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/health":
            body, status = b"ok", 200
        elif self.path.startswith("/key/") and self.path[5:] in DATA:
            body, status = DATA[self.path[5:]].encode(), 200
        else:
            body, status = b"no such key", 404
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


ThreadingHTTPServer(("0.0.0.0", 8080), Handler).serve_forever()
