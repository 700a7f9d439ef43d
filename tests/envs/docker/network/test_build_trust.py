"""The Dockerfile rewrite that makes a build's RUN steps trust the frozen network's CA
(``network/build_trust.py``): the CA argument after every FROM, each RUN in the stage's
SHELL's exec form around the original command, the original named in messages; the wrapper
itself run by a real shell on a fake root (the CA trusted inside the step, gone after it,
the command's exit status kept)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from replaykit.envs.docker.network.build_trust import CA_ARG, step_name, trust_rewrite, wrap

DOCKERFILE = """# escape=\\
FROM debian:bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update && \\
    # a comment inside the continuation
    apt-get install -y tree # trailing comment
RUN ["/bin/sh", "-c", "echo from-heredoc"]
RUN ["echo", "direct"]
ONBUILD RUN echo later
FROM build
RUN echo second stage
"""


def runs(text: str) -> list[list[str]]:
    return [json.loads(line[4:]) for line in text.splitlines() if line.startswith("RUN [")]


def test_each_stage_gets_the_ca_argument_and_each_shell_run_the_wrapper() -> None:
    out, names = trust_rewrite(DOCKERFILE)
    lines = out.splitlines()
    assert [i for i, line in enumerate(lines) if line == f"ARG {CA_ARG}"] == [2, 9]
    wrapped = runs(out)
    assert wrapped[0][:4] == ["/bin/bash", "-o", "pipefail", "-c"]  # the stage's SHELL
    assert "(\napt-get update &&     apt-get install -y tree # trailing comment\n)" in wrapped[0][4]
    assert wrapped[1][:2] == ["/bin/sh", "-c"] and "(\necho from-heredoc\n)" in wrapped[1][2]
    assert ["echo", "direct"] in wrapped  # a program run directly is left alone
    assert "ONBUILD RUN echo later" in lines
    assert wrapped[-1][:2] == ["/bin/sh", "-c"]  # a new stage starts with the default shell
    shown = sorted(names.values())
    assert "RUN apt-get update && apt-get install -y tree # trailing comment" in shown
    assert step_name(lines[4], names) == "RUN apt-get update && apt-get install -y tree # trailing comment"


def test_a_dockerfile_without_run_only_gains_the_argument() -> None:
    out, names = trust_rewrite("FROM scratch\nCOPY a /a\n")
    assert out == f"FROM scratch\nARG {CA_ARG}\nCOPY a /a\n" and names == {}


def test_the_wrapper_trusts_the_ca_for_the_step_only_and_keeps_its_status(tmp_path: Path) -> None:
    root = tmp_path / "root"
    bundle = root / "etc" / "ssl" / "certs" / "ca-certificates.crt"
    bundle.parent.mkdir(parents=True)
    bundle.write_text("SYSTEM\n")
    script = wrap('cat "$SSL_CERT_FILE" > "$ROOT/seen"; echo "$SOURCE_DATE_EPOCH" >> "$ROOT/seen"; exit 3')
    script = script.replace("/tmp/", f"{tmp_path}/").replace("/etc/ssl/certs/", f"{bundle.parent}/")
    proc = subprocess.run(
        ["/bin/sh", "-c", script],
        env={"PATH": "/usr/bin:/bin", CA_ARG: "THE-CA", "ROOT": str(root)},
        timeout=30,
    )
    assert proc.returncode == 3
    assert (root / "seen").read_text() == "SYSTEM\nTHE-CA\n1700000000\n"
    assert bundle.read_text() == "SYSTEM\n"  # restored
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]  # nothing left behind


def test_a_failed_wrapped_step_is_one_line_naming_the_step_as_written() -> None:
    """Docker's error quotes the command it ran: for a wrapped RUN, the whole CA wrapper (many
    lines). The failure is one line naming the task's own step and the exit code, never the wrapper."""
    from replaykit.envs.docker.image_build import build_failure

    original = 'RUN echo "this image never builds" && exit 3'
    out, names = trust_rewrite(f"FROM debian:bookworm-slim\n{original}\n")
    wrapped = next(line for line in out.splitlines() if line.startswith("RUN ["))
    script = json.loads(wrapped[4:])[2]
    error = f"The command '/bin/sh -c {script}' returned a non-zero code: 3"
    line = build_failure(
        "t/environment/Dockerfile", f"Step 2/3 : {names[wrapped]}", error, ["this image never builds"]
    )
    assert line == (
        "t/environment/Dockerfile: image build failed at step "
        f"`{original}`: its command returned a non-zero code: 3 (this image never builds)"
    )
