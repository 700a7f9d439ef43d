"""mini-swe-agent's environment protocol over replaykit's recording bridge (standard library only:
it runs inside mini-swe-agent's own process and venv). Each command is posted to the bridge
(``$REPLAYKIT_BRIDGE_URL``, bearer ``$REPLAYKIT_BRIDGE_TOKEN``), which runs it in the task's
environment as a recorded step; the answer is shaped as mini-swe-agent's ``LocalEnvironment``
shapes its own (stdout then stderr as ``output``, ``returncode``, ``exception_info``), and its
submission line ends the run the same way."""

import importlib
import json
import os
import urllib.error
import urllib.request
from typing import Any

DONE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: what the prompt shows of the system: fixed (the host's uname would make requests differ by machine)
SYSTEM = {"system": "Linux", "release": "", "version": "", "machine": "x86_64"}


class BridgeEnvironmentConfig:
    def __init__(
        self, timeout: int = 30, cwd: str = "", env: dict[str, str] | None = None, **extra: Any
    ) -> None:
        self.timeout, self.cwd, self.env, self.extra = timeout, cwd, dict(env or {}), extra

    def model_dump(self, mode: str | None = None) -> dict[str, Any]:
        return {"timeout": self.timeout, "cwd": self.cwd, "env": self.env, **self.extra}


class BridgeEnvironment:
    def __init__(self, **kwargs: Any) -> None:
        self.config = BridgeEnvironmentConfig(**kwargs)
        self.url = os.environ["REPLAYKIT_BRIDGE_URL"].rstrip("/") + "/exec"
        self.token = os.environ["REPLAYKIT_BRIDGE_TOKEN"]
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        seconds = timeout or self.config.timeout
        answer = self._post({"command": action.get("command", ""), "timeout": seconds})
        output: dict[str, Any] = {
            "output": answer["stdout"] + answer["stderr"],
            "returncode": answer["exit_code"],
            "exception_info": "",
        }
        if answer.get("timed_out"):
            output["exception_info"] = (
                f"An error occurred while executing the command: timed out after {seconds} seconds"
            )
        self._check_finished(output)
        return output

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with self.opener.open(request, timeout=None) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as exc:  # the episode stopped (a limit, a divergence): end the run
            raise RuntimeError(
                f"replaykit bridge: {exc.code} {exc.read().decode(errors='replace')}"
            ) from None

    def _check_finished(self, output: dict[str, Any]) -> None:
        lines = output.get("output", "").lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == DONE and output["returncode"] == 0:
            # mini-swe-agent's own exception (this module runs in its process, its venv)
            Submitted = importlib.import_module("minisweagent.exceptions").Submitted
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config.model_dump(), **SYSTEM, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(),
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                }
            }
        }
