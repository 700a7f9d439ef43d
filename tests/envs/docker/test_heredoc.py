"""The heredoc transform: documented forms rewritten into classic instructions (unit),
and a task whose Dockerfile uses every form builds and behaves as BuildKit would (Docker)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from replaykit.core.errors import EnvError
from replaykit.envs.docker.heredoc import rewrite_heredocs


def runs(text: str) -> list[list[str]]:
    """The exec-form argv of every RUN line of a rewritten Dockerfile."""
    return [json.loads(line[4:]) for line in text.splitlines() if line.startswith("RUN [")]


def test_no_heredoc_is_unchanged() -> None:
    text = "FROM debian:bookworm-slim\r\nRUN echo '<<not a heredoc'\nRUN a \\\n  b\n"
    assert rewrite_heredocs(text.replace("<<", "< <")) == text.replace("<<", "< <")
    plain = "FROM x\nRUN echo hi\n"
    assert rewrite_heredocs(plain) is plain


def test_run_heredoc_is_a_script_for_the_shell() -> None:
    out = rewrite_heredocs("FROM x\nRUN <<EOF\nset -e\necho one > /a\necho two >> /a\nEOF\nRUN echo after\n")
    assert out.splitlines()[0] == "FROM x" and out.splitlines()[-1] == "RUN echo after"
    assert runs(out) == [["/bin/sh", "-c", "set -e\necho one > /a\necho two >> /a\n"]]


def test_run_cmd_heredoc_goes_to_the_shell_verbatim() -> None:
    text = "FROM x\nRUN cat > /f <<'EOF' && chmod 600 /f\n$HOME stays\nEOF\n"
    assert runs(rewrite_heredocs(text)) == [
        ["/bin/sh", "-c", "cat > /f <<'EOF' && chmod 600 /f\n$HOME stays\nEOF\n"]
    ]


def test_dash_form_strips_tabs_and_shell_instruction_is_followed() -> None:
    out = rewrite_heredocs(
        'FROM x\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\nRUN <<-EOT\n\techo a\n\t\techo b\n\tEOT\n'
    )
    assert runs(out) == [
        ["/bin/bash", "-o", "pipefail", "-c", "echo a\necho b\n"]
    ]  # every leading tab, as the shell strips them


def test_shebang_script_runs_as_a_file() -> None:
    (argv,) = runs(rewrite_heredocs("FROM x\nRUN <<EOF\n#!/usr/bin/env python3\nprint(1)\nEOF\n"))
    assert (
        argv[:2] == ["/bin/sh", "-c"]
        and "#!/usr/bin/env python3\nprint(1)\n" in argv[2]
        and "chmod +x" in argv[2]
    )


def test_copy_heredocs_quoted_unquoted_and_flags() -> None:
    (argv,) = runs(
        rewrite_heredocs('FROM x\nCOPY --chmod=755 <<"EOF" /usr/local/bin/hi\n#!/bin/sh\necho $1\nEOF\n')
    )
    script = argv[2]
    assert "cat > /usr/local/bin/hi <<'REPLAYKIT_HEREDOC'\n#!/bin/sh\necho $1\nREPLAYKIT_HEREDOC" in script
    assert "chmod 755 /usr/local/bin/hi" in script
    (argv,) = runs(rewrite_heredocs("FROM x\nCOPY <<a.txt <<b.txt /etc/conf/\nA $V\na.txt\nB\nb.txt\n"))
    assert (
        "cat > /etc/conf/a.txt <<REPLAYKIT_HEREDOC_EXPAND\nA $V\n" in argv[2]
        and "cat > /etc/conf/b.txt" in argv[2]
    )


@pytest.mark.parametrize(
    "text,match",
    [
        ("FROM x\nRUN <<EOF\necho\n", "never closed"),
        ("FROM x\nADD <<EOF /a\nx\nEOF\n", "ADD with a heredoc"),
        ("FROM x\nCOPY --from=build <<EOF /a\nx\nEOF\n", "COPY --from"),
    ],
)
def test_unsupported_or_broken_forms_are_one_line(text: str, match: str) -> None:
    with pytest.raises(EnvError, match=match):
        rewrite_heredocs(text, "task/environment/Dockerfile")


DOCKERFILE = """FROM debian:bookworm-slim
WORKDIR /app
ENV GREETING=hello
RUN <<EOF
set -e
mkdir -p /app/out
echo "script $GREETING" > /app/out/run.txt
EOF
RUN cat > /app/out/cmd.txt <<'EOF'
literal $GREETING
EOF
RUN <<-EOF
	echo "tabs gone" > /app/out/dash.txt
	EOF
COPY <<EOF /app/out/copy.txt
copied $GREETING
EOF
COPY --chmod=755 <<'EOF' /app/out/tool.sh
#!/bin/sh
echo "tool $1"
EOF
RUN <<EOF
#!/usr/bin/env python3
open("/app/out/py.txt", "w").write("python\\n")
EOF
"""


@pytest.mark.docker
def test_heredoc_dockerfile_builds_and_behaves(docker_base: str, tmp_path: Path) -> None:
    from replaykit.envs.docker.env import DockerEnv
    from replaykit.envs.docker.image_build import ensure_task_image
    from replaykit.envs.tasks import load_task

    folder = tmp_path / "heredoc-task"
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text('version = "2.0"\n[environment]\nmemory_mb = 256\n')
    (folder / "instruction.md").write_text("Nothing.\n")
    (folder / "tests" / "test.sh").write_text(
        'mkdir -p "$LOGS_DIR/verifier"; echo 1 > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    (folder / "environment" / "Dockerfile").write_text(DOCKERFILE)
    task = load_task(folder)
    image = ensure_task_image(task)
    with DockerEnv(task, image.id, timeout_sec=20) as env:
        obs = env.run(
            'for f in out/*.txt; do echo "$f: $(cat $f)"; done; out/tool.sh x; stat -c %a out/tool.sh'
        )
    assert obs.exit_code == 0, obs
    assert obs.stdout.splitlines() == [
        "out/cmd.txt: literal $GREETING",
        "out/copy.txt: copied hello",
        "out/dash.txt: tabs gone",
        "out/py.txt: python",
        "out/run.txt: script hello",
        "tool x",
        "755",
    ]


@pytest.mark.docker
def test_build_errors_are_plain_and_docker_image_errors_name_the_field(
    docker_base: str, tmp_path: Path
) -> None:
    folder = tmp_path / "bad-build"
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text('version = "2.0"\n')
    (folder / "instruction.md").write_text("Nothing.\n")
    (folder / "tests" / "test.sh").write_text("true\n")
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text("true\n")
    (folder / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nRUN printf '\\033[31mred failure\\033[0m\\n'; exit 3\n"
    )
    proc = subprocess.run(
        ["replaykit", "tasks", "check", str(folder), "--json"], capture_output=True, text=True, timeout=300
    )
    problem = json.loads(proc.stdout)["tasks"][0]["problem"]
    assert "build failed" in problem and "\x1b" not in problem and "red failure" in problem
    (folder / "environment" / "Dockerfile").unlink()
    (folder / "task.toml").write_text(
        'version = "2.0"\n[environment]\ndocker_image = "nonexistent/prebuilt:1"\n'
    )
    proc = subprocess.run(
        ["replaykit", "tasks", "check", str(folder), "--json"], capture_output=True, text=True, timeout=300
    )
    problem = json.loads(proc.stdout)["tasks"][0]["problem"]
    assert "environment.docker_image 'nonexistent/prebuilt:1'" in problem and "Dockerfile" not in problem
