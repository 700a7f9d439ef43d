"""A Dockerfile rewritten so every ``RUN`` of a build through the frozen network trusts the
proxy's CA (TLS included) — the classic builder has no secret mounts, so the rewrite is the
only way in, as the heredoc one (``heredoc.py``) is for heredocs.

:func:`trust_rewrite` declares ``ARG REPLAYKIT_BUILD_CA`` after every ``FROM`` (the CA's
certificate travels as a build argument: it is never a file of the image) and turns each
``RUN`` into the exec form of the stage's ``SHELL`` around a wrapper that, for that step only,
writes the CA to ``/tmp``, appends it to the system bundle (restored afterwards unless the
step rewrote the bundle itself), points the usual CA variables at it and sets the determinism
pins (``SOURCE_DATE_EPOCH`` unless the Dockerfile set one, ``PYTHONHASHSEED=0``), then runs
the original command in a subshell and exits with its status. A ``RUN`` in exec form is
wrapped only when it runs a shell (``["/bin/sh", "-c", …]``, what ``heredoc.py`` writes);
others are left alone. ``ONBUILD RUN`` is left alone too.

The image's filesystem never holds the CA, so a rebuild trusting another CA gives the same
files; :func:`step_names` maps each rewritten instruction back to the original for the
build's messages (``image build failed at step `RUN …```).
"""

from __future__ import annotations

import json
import re

from replaykit.core.determinism import SOURCE_DATE_EPOCH

CA_ARG = "REPLAYKIT_BUILD_CA"
_DIRECTIVE = re.compile(r"^#\s*(\w+)\s*=\s*(\S+)\s*$")
_INSTR = re.compile(r"^\s*([A-Za-z]+)(?:\s+|$)(.*)$", re.DOTALL)
_FLAGS = re.compile(r"^((?:--\S+\s+)*)(.*)$", re.DOTALL)
_SHELLS = ("sh", "bash", "dash", "ash", "zsh")
_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")

#: the step's wrapper; ``COMMAND`` stands for the original command (its own lines, in a subshell)
WRAPPER = (
    "rk_ca=/tmp/.replaykit-build-ca.pem rk_all=/tmp/.replaykit-build-bundle.pem "
    "rk_sys=/etc/ssl/certs/ca-certificates.crt rk_old=/tmp/.replaykit-build-bundle.orig\n"
    f'printf "%s\\n" "${CA_ARG}" > "$rk_ca"\n'
    'if [ -f "$rk_sys" ] && [ ! -L "$rk_sys" ]; then cat "$rk_sys" "$rk_ca" > "$rk_all"; '
    'cp -p "$rk_sys" "$rk_old"; cat "$rk_ca" >> "$rk_sys"; else cp "$rk_ca" "$rk_all"; fi\n'
    "export "
    + " ".join(f'{name}="$rk_all"' for name in _VARIABLES)
    + ' NODE_EXTRA_CA_CERTS="$rk_ca" UV_NATIVE_TLS=1 PYTHONHASHSEED=0\n'
    + f': "${{SOURCE_DATE_EPOCH:={SOURCE_DATE_EPOCH}}}"; export SOURCE_DATE_EPOCH\n'
    + "(\n\0COMMAND\0\n)\nrk_rc=$?\n"
    'if [ -f "$rk_old" ]; then if cmp -s "$rk_sys" "$rk_all"; then cp -p "$rk_old" "$rk_sys"; fi; '
    'rm -f "$rk_old"; fi\n'
    'rm -f "$rk_ca" "$rk_all"\nexit $rk_rc\n'
)


def wrap(command: str) -> str:
    """The step's script: ``command`` between the CA's set-up and its removal."""
    return WRAPPER.replace("\0COMMAND\0", command)


def _instructions(text: str) -> tuple[list[tuple[str, list[str]]], str]:
    """The Dockerfile as (logical instruction, its physical lines) in order, and the escape char."""
    escape = "\\"
    lines = text.splitlines()
    for line in lines:  # parser directives: only before the first instruction or comment body
        m = _DIRECTIVE.match(line)
        if not m:
            break
        if m.group(1).lower() == "escape" and m.group(2) in ("\\", "`"):
            escape = m.group(2)
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            out.append((line, [line]))
            i += 1
            continue
        physical, parts = [line], []
        current = line
        while current.rstrip().endswith(escape) and i + 1 < len(lines):
            parts.append(current.rstrip()[: -len(escape)])
            i += 1
            current = lines[i]
            physical.append(current)
            while (not current.strip() or current.lstrip().startswith("#")) and i + 1 < len(lines):
                i += 1  # comment and empty lines inside a continuation are dropped by Docker
                current = lines[i]
                physical.append(current)
        parts.append(current)
        out.append(("".join(parts), physical))
        i += 1
    return out, escape


def _shell_of(rest: str) -> list[str] | None:
    try:
        value = json.loads(rest.strip())
    except ValueError:
        return None
    return [str(v) for v in value] if isinstance(value, list) and value else None


def _is_shell(argv: list[str]) -> bool:
    return argv[0].rsplit("/", 1)[-1] in _SHELLS and len(argv) >= 3 and argv[1] == "-c"


def _wrapped(rest: str, shell: list[str]) -> str | None:
    """The ``RUN`` instruction's new text, or None to leave it as it is."""
    m = _FLAGS.match(rest.strip())
    assert m is not None
    flags, command = m.group(1), m.group(2)
    if command.startswith("["):
        argv = _shell_of(command)
        if argv is None:
            return None  # not JSON: Docker runs it through the shell
        if not _is_shell(argv):
            return None  # a program run directly: its fetches get the proxy, not the CA
        script = argv[2]
        if len(argv) > 3:  # sh -c SCRIPT NAME ARGS…: keep the positional arguments
            return f"RUN {flags}" + json.dumps([*argv[:2], wrap(script), *argv[3:]], ensure_ascii=False)
        return f"RUN {flags}" + json.dumps([*argv[:2], wrap(script)], ensure_ascii=False)
    return f"RUN {flags}" + json.dumps([*shell, wrap(command)], ensure_ascii=False)


def trust_rewrite(text: str) -> tuple[str, dict[str, str]]:
    """The Dockerfile with the CA argument after each ``FROM`` and every ``RUN`` wrapped, and
    each new ``RUN`` line → the original instruction (for messages)."""
    instructions, _escape = _instructions(text)
    out: list[str] = []
    names: dict[str, str] = {}
    shell = ["/bin/sh", "-c"]
    for logical, physical in instructions:
        m = _INSTR.match(logical)
        keyword = m.group(1).upper() if m and not logical.lstrip().startswith("#") else ""
        rest = m.group(2) if m else ""
        if keyword == "FROM":
            shell = ["/bin/sh", "-c"]  # every stage starts with the default shell
            out.extend(physical)
            out.append(f"ARG {CA_ARG}")
            continue
        if keyword == "SHELL":
            shell = _shell_of(rest) or shell
        if keyword == "RUN":
            new = _wrapped(rest, shell)
            if new is not None:
                out.append(new)
                names[new] = " ".join(logical.split())
                continue
        out.extend(physical)
    return "\n".join(out) + "\n", names


def step_name(step: str, names: dict[str, str]) -> str:
    """A ``Step N/M : INSTRUCTION`` line's instruction as the task's Dockerfile wrote it."""
    return names.get(step.strip(), step)
