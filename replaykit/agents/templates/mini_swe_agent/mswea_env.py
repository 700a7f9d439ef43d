"""mini-swe-agent's environment protocol over replaykit's recording bridge (standard library only:
it runs inside mini-swe-agent's own process and venv). Each command is posted to the bridge
(``$REPLAYKIT_BRIDGE_URL``, bearer ``$REPLAYKIT_BRIDGE_TOKEN``), which runs it in the task's
environment as a recorded step; the answer is shaped as mini-swe-agent's ``LocalEnvironment``
shapes its own (stdout then stderr as ``output``, ``returncode``, ``exception_info``), and its
submission line ends the run the same way. What crosses the bridge is typed (``ExecBody``,
``ExecAnswer``: ``replaykit/agents/wire.py``'s ``ExecRequest`` and ``ExecAnswer``) and an answer
of another shape is one error naming what is wrong, never a ``KeyError``."""

import importlib
import json
import os
import urllib.error
import urllib.request
from typing import NotRequired, TypedDict

DONE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: what the prompt shows of the system: fixed (the host's uname would make requests differ by machine)
SYSTEM = {"system": "Linux", "release": "", "version": "", "machine": "x86_64"}


class Action(TypedDict, total=False):
    """What mini-swe-agent's parser made of a reply (only ``command`` is read)."""

    command: str


class ExecBody(TypedDict):
    """``POST /exec`` (``wire.ExecRequest``)."""

    command: str
    timeout: int


class ExecAnswer(TypedDict):
    """The bridge's answer (``wire.ExecAnswer``)."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: NotRequired[bool]


class Output(TypedDict):
    """What ``execute`` returns, as mini-swe-agent's ``LocalEnvironment`` shapes it."""

    output: str
    returncode: int
    exception_info: str


def exec_answer(raw: bytes) -> ExecAnswer:
    """The bridge's answer, checked: another shape is one ``RuntimeError`` naming the field."""
    try:
        doc = json.loads(raw)
    except ValueError:
        raise RuntimeError(f"replaykit bridge: the answer is not JSON: {raw[:200]!r}") from None
    if not isinstance(doc, dict):
        raise RuntimeError(f"replaykit bridge: the answer is not an object: {raw[:200]!r}")
    for name, kind, said in (
        ("stdout", str, "a string"),
        ("stderr", str, "a string"),
        ("exit_code", int, "an integer"),
        ("timed_out", bool, "true or false"),
    ):
        if name == "timed_out" and name not in doc:
            continue
        value = doc.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise RuntimeError(f"replaykit bridge: the answer's {name!r} is not {said}: {value!r}")
    answer: ExecAnswer = {"stdout": doc["stdout"], "stderr": doc["stderr"], "exit_code": doc["exit_code"]}
    if "timed_out" in doc:
        answer["timed_out"] = doc["timed_out"]
    return answer


class BridgeEnvironmentConfig:
    def __init__(
        self, timeout: int = 30, cwd: str = "", env: dict[str, str] | None = None, **extra: object
    ) -> None:
        self.timeout, self.cwd, self.env, self.extra = timeout, cwd, dict(env or {}), extra

    def model_dump(self, mode: str | None = None) -> dict[str, object]:
        """The configuration as mini-swe-agent's own config models dump it (its extra keys kept)."""
        return {"timeout": self.timeout, "cwd": self.cwd, "env": self.env, **self.extra}


class BridgeEnvironment:
    def __init__(
        self, timeout: int = 30, cwd: str = "", env: dict[str, str] | None = None, **extra: object
    ) -> None:
        self.config = BridgeEnvironmentConfig(timeout, cwd, env, **extra)
        self.url = os.environ["REPLAYKIT_BRIDGE_URL"].rstrip("/") + "/exec"
        self.token = os.environ["REPLAYKIT_BRIDGE_TOKEN"]
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy

    def execute(self, action: Action, cwd: str = "", *, timeout: int | None = None) -> Output:
        seconds = timeout or self.config.timeout
        answer = self._post({"command": action.get("command", ""), "timeout": seconds})
        output: Output = {
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

    def _post(self, body: ExecBody) -> ExecAnswer:
        request = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with self.opener.open(request, timeout=None) as response:
                raw: bytes = response.read()
        except urllib.error.HTTPError as exc:  # the episode stopped (a limit, a divergence): end the run
            raise RuntimeError(
                f"replaykit bridge: {exc.code} {exc.read().decode(errors='replace')}"
            ) from None
        return exec_answer(raw)

    def _check_finished(self, output: Output) -> None:
        lines = output["output"].lstrip().splitlines(keepends=True)
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

    def get_template_vars(self, **kwargs: object) -> dict[str, object]:
        return {**self.config.model_dump(), **SYSTEM, **kwargs}

    def serialize(self) -> dict[str, dict[str, dict[str, object]]]:
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(),
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                }
            }
        }
