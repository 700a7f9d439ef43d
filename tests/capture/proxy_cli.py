"""``replaykit proxy`` as a real process, for tests: started, talked to, signalled, read back.

with ProxyProcess(store, "--upstream", url) as proxy:
    client(proxy.url)
code, report, stderr = proxy.result          # after SIGINT (the default) or proxy.stop(SIGKILL)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any


class ProxyProcess:
    def __init__(
        self,
        store: Path,
        *args: str,
        name: str = "s",
        cwd: Path | None = None,
        as_json: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        argv = [sys.executable, "-m", "replaykit.cli", "proxy", "--name", name, "--store", str(store)]
        argv += ["--json"] if as_json else []
        self.as_json = as_json
        self.stdout = ""
        self.proc = subprocess.Popen(
            [*argv, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={
                **os.environ,
                "COLUMNS": "400",
                "PWD": str(cwd) if cwd else os.environ.get("PWD", ""),
                **(env or {}),
            },
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.url = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(60) or not self.url:
            self.proc.kill()
            raise AssertionError("the proxy did not start: " + "".join(self.lines))
        self.result: tuple[int, dict[str, Any] | None, str] = (-1, None, "")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"\) on (http://\S+/v1): point the client", line)
            if found and not self.url:
                self.url = found.group(1)
                self._ready.set()
        self._ready.set()

    def wait_for(self, text: str, timeout: float = 30) -> str:
        """The first stderr line holding ``text`` (printed while the session runs)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in: {''.join(self.lines)}")

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, dict[str, Any] | None, str]:
        """Signal the proxy, wait for it, and read what it printed (stderr is the reader's alone);
        once stopped, the same result again."""
        if self.result[0] != -1:
            return self.result
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        assert self.proc.stdout is not None
        try:
            out = self.proc.stdout.read()
            self.proc.wait(timeout=60)
        finally:
            self.proc.kill()
        self._reader.join(timeout=10)
        self.stdout = out
        report = json.loads(out) if out.strip() and self.as_json else None
        self.result = (self.proc.returncode, report, "".join(self.lines))
        return self.result

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
