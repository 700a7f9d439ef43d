#!/bin/bash
# Starts a server in the background and returns; the verifier then queries it (Harbor keeps what
# the solution or the agent started running until the verifier has run). Its request log goes to
# the stream it inherited, as a plain `&` leaves it.
cd "${APP_DIR:-/app}"
python3 - <<'PY' &
import http.server, pathlib
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"served in the background"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
pathlib.Path("port.tmp").write_text(str(server.server_port))
pathlib.Path("port.tmp").rename("port")
server.serve_forever()
PY
for _ in $(seq 200); do [ -s port ] && break; sleep 0.05; done
echo "server started"
