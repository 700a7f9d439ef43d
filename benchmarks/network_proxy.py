"""Benchmark: the frozen network's proxy — bounded memory on a large body, and its cost on
a pip-download-like workload.

1. A 200 MB body (generated, never on disk upstream) passes through the proxy in record
   mode from a loopback HTTP server; the proxy's peak RSS (``VmHWM`` of the mitmdump
   process) is printed, then the peak RSS growth of this process while the body streams
   from the spool into a store's blobs, then the proxy's peak RSS while it serves the
   recording back in replay mode (target: all far below the body's size).
2. 1,000 small files (1–64 KB, like wheels and index pages) fetched over one keep-alive
   connection, directly and through the recording proxy, interleaved round-robin; the
   proxy's overhead is printed as a CPU-time ratio to direct (the process tree's CPU:
   client, server and the proxy's child process), wall time beside it.

Usage: python benchmarks/network_proxy.py [--mb 200] [--files 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import random
import resource
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import interleaved, load_line, median_cpu, median_wall, ratio

from replaykit.cassette.events import Episode, NetEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.envs.docker.network import server
from replaykit.envs.docker.network.ca import ensure_ca
from replaykit.envs.docker.network.extras import reported, serve_folder
from replaykit.envs.docker.network.server import ProxyServer, read_log
from replaykit.episodes.network import store_bodies

CHUNK = 1 << 16


def upstream(big: int, files: dict[str, bytes]) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path.endswith("/big"):
                self.send_response(200)
                self.send_header("content-type", "application/octet-stream")
                self.send_header("content-length", str(big))
                self.end_headers()
                block = bytes(range(256)) * (CHUNK // 256)
                left = big
                while left:
                    n = min(left, len(block))
                    self.wfile.write(block[:n])
                    left -= n
                return
            body = files.get(self.path.rsplit("/", 1)[-1])
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "application/octet-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def fetch_all(host: str, port: int, base: str, names: list[str], via_proxy: bool) -> int:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    total = 0
    for name in names:
        conn.request("GET", f"{base}/{name}" if via_proxy else f"/{name}")
        response = conn.getresponse()
        while block := response.read(CHUNK):  # never the whole body in memory
            total += len(block)
        assert response.status == 200, response.status
    conn.close()
    return total


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    problem = server.check()
    if problem:
        sys.exit(f"cannot run: {problem}")
    rng = random.Random(0)
    files = {f"pkg-{i:04d}.whl": rng.randbytes(rng.randint(1024, 65536)) for i in range(args.files)}
    big = args.mb * 1024 * 1024
    srv = upstream(big, files)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    print(load_line())
    with tempfile.TemporaryDirectory(prefix="replaykit-bench-net-") as tmp_text:
        tmp = Path(tmp_text)
        store = Store(tmp / "store")
        ca = ensure_ca(store.root)

        # 1. a large body through the proxy, then into the store
        with ProxyServer(ca, "record", tmp / "spool-big") as proxy:
            assert proxy.process is not None
            idle = peak_rss_kb(proxy.process.pid)
            got = fetch_all(proxy.host, proxy.port, base, ["big"], via_proxy=True)
            peak = peak_rss_kb(proxy.process.pid)
        assert got == big, got
        records = read_log(tmp / "spool-big")
        key = CassetteKey("0" * 40, "bench", "d", ModelId("m", "e", ""), 0, "c", (("env", "docker"),))
        episode = Episode(key, [NetEvent.from_record(reported(r, tmp / "spool-big")) for r in records], {})
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        store_bodies(store, episode)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        grown = after - before
        serve = serve_folder(store.get_blob, [e.stored() for e in episode.net_events], tmp / "serve")
        with ProxyServer(ca, "replay", tmp / "spool-serve", serve) as proxy:
            assert proxy.process is not None
            served = fetch_all(proxy.host, proxy.port, base, ["big"], via_proxy=True)
            served_peak = peak_rss_kb(proxy.process.pid)
        assert served == big, served
        print(
            f"{args.mb} MB body through the proxy: proxy peak RSS {peak / 1024:.0f} MB "
            f"(idle {idle / 1024:.0f} MB); into the store in {len(episode.net_events[0].chunks)} chunks, "
            f"this process's peak RSS grew {grown / 1024:.0f} MB (its peak: {after / 1024:.0f} MB); "
            "served back from the store: "
            f"proxy peak RSS {served_peak / 1024:.0f} MB"
        )

        # 2. many small files, direct vs through the recording proxy
        names = list(files)
        with ProxyServer(ca, "record", tmp / "spool-many") as proxy:
            host, port = proxy.host, proxy.port
            samples = interleaved(
                {
                    "direct": lambda: fetch_all("127.0.0.1", srv.server_address[1], base, names, False),
                    "proxy": lambda: fetch_all(host, port, base, names, True),
                },
                repeats=args.repeats,
            )
        size = sum(len(b) for b in files.values())
        print(
            f"{args.files} files ({size / 1e6:.1f} MB): direct {median_cpu(samples['direct']):.2f} s CPU "
            f"({median_wall(samples['direct']):.2f} s wall), through the proxy "
            f"{median_cpu(samples['proxy']):.2f} s CPU ({median_wall(samples['proxy']):.2f} s wall)"
        )
        print(
            f"proxy overhead: {ratio(samples['proxy'], samples['direct']):.1f}x direct (CPU time, same run)"
        )
    srv.shutdown()


if __name__ == "__main__":
    main()
