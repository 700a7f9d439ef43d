"""Dockerfile heredocs for builders that predate them: rewrite into classic instructions.

replaykit builds through the Docker SDK's ``/build`` API, which is the classic
builder on every engine (the SDK has no BuildKit session), and the classic builder
has no heredocs (``RUN <<EOF`` fails with "unknown instruction"). So
:func:`rewrite_heredocs` turns the documented heredoc forms (Dockerfile frontend
1.4+) into equivalent classic instructions before every build; a Dockerfile without
heredocs is returned unchanged, byte for byte.

* ``RUN <<EOF`` … ``EOF`` (the heredoc *is* the command): the body is a script run by
  the current shell (``SHELL``, default ``/bin/sh -c``) → ``RUN ["/bin/sh", "-c", "<body>"]``
  (exec form, a JSON string: newlines survive, nothing is expanded by the builder).
  A body starting with ``#!`` is written to a temporary file and executed, as
  BuildKit does.
* ``RUN cmd <<EOF`` (and several heredocs, ``<<-EOF``, quoted delimiters): the shell
  itself understands heredocs, so the whole instruction, body lines included, is
  handed to the current shell verbatim in exec form.
* ``<<-EOF``: leading tabs are stripped from the body and the delimiter line (done by
  the shell for ``RUN cmd <<-EOF``; by this module for the other forms).
* ``COPY [--chmod=M] [--chown=U:G] <<EOF /path`` (also several heredocs to a
  ``dir/``): the file is written by a ``RUN`` with ``cat > /path <<'EOF'``; an
  unquoted delimiter lets ``$VAR`` of ``ENV``/``ARG`` expand, a quoted one
  (``<<"EOF"``, ``<<'EOF'``) keeps the body literal, as BuildKit does. Needs ``sh``
  and ``cat`` in the image (every Debian/Ubuntu/Python base has them).

Anything else with a heredoc (``ADD <<EOF``, ``RUN <<A <<B`` where the first word is a
heredoc and there are several) is refused with an ``EnvError`` naming the line.
"""

from __future__ import annotations

import json
import re
import shlex

from replaykit.core.errors import EnvError

_HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_][A-Za-z0-9_.-]*)\2")
_INSTR = re.compile(r"^\s*([A-Za-z]+)(\s+|$)")
_SHELL = re.compile(r"^\s*SHELL\s+(\[.*\])\s*$", re.IGNORECASE)
_FLAG = re.compile(r"^--([a-z-]+)=(\S+)$")
_SCRIPT = "/tmp/.replaykit-heredoc"


def _exec_form(argv: list[str]) -> str:
    return json.dumps(argv, ensure_ascii=False)


def _collect(
    lines: list[str], i: int, markers: list[tuple[str, str, str]], where: str
) -> tuple[list[str], int]:
    """The bodies of ``markers`` from the lines after ``i``; returns (bodies, next index)."""
    bodies = []
    for strip, _quote, word in markers:
        body: list[str] = []
        while True:
            i += 1
            if i >= len(lines):
                raise EnvError(f"{where}: heredoc <<{word} is never closed (no line '{word}')")
            line = lines[i].lstrip("\t") if strip else lines[i]
            if line.rstrip("\r") == word:
                break
            body.append(line)
        bodies.append("\n".join(body) + ("\n" if body else ""))
    return bodies, i


def rewrite_heredocs(text: str, where: str = "Dockerfile") -> str:
    """The Dockerfile with every heredoc rewritten into classic instructions (see the module docstring)."""
    if "<<" not in text:
        return text
    lines = text.splitlines()
    out: list[str] = []
    shell = ["/bin/sh", "-c"]
    changed = False
    i = 0
    while i < len(lines):
        line = lines[i]
        shell_match = _SHELL.match(line)
        if shell_match:
            try:
                shell = list(json.loads(shell_match.group(1)))
            except ValueError:
                pass
        instr = _INSTR.match(line)
        keyword = instr.group(1).upper() if instr else ""
        markers: list[tuple[str, str, str]] = (
            [(m.group(1), m.group(2), m.group(3)) for m in _HEREDOC.finditer(line)]
            if keyword in ("RUN", "COPY", "ADD")
            else []
        )
        if not markers:
            out.append(line)
            i += 1
            continue
        changed = True
        rest = line[instr.end() :] if instr else ""
        rewritten, i = _rewrite(keyword, rest, lines, i, markers, shell, where)
        out.append(rewritten)
        i += 1
    if not changed:
        return text
    return "\n".join(out) + "\n"


def _rewrite(
    keyword: str,
    rest: str,
    lines: list[str],
    i: int,
    markers: list[tuple[str, str, str]],
    shell: list[str],
    where: str,
) -> tuple[str, int]:
    """The classic instruction for line ``i`` (a ``keyword`` with heredocs ``markers``, ``rest``
    after the keyword) and the index of its last body line."""
    start = i
    if keyword == "ADD":
        raise EnvError(f"{where}: line {start + 1}: ADD with a heredoc is not supported; use COPY <<EOF")
    if keyword == "COPY":
        bodies, i = _collect(lines, i, markers, where)
        return _copy(rest, markers, bodies, where, start + 1), i
    if rest.lstrip().startswith("<<"):  # RUN <<EOF: the heredoc is the script
        if len(markers) > 1:
            raise EnvError(
                f"{where}: line {start + 1}: RUN with several heredocs as the command is not supported"
            )
        bodies, i = _collect(lines, i, markers, where)
        tail = _HEREDOC.sub("", rest, count=1).strip()
        return _run_script(bodies[0], tail, shell), i
    # RUN cmd <<EOF ...: the shell reads the heredocs itself, body lines verbatim
    _bodies, body_end = _collect(lines, i, markers, where)
    script = "\n".join([rest.strip(), *lines[i + 1 : body_end + 1]]) + "\n"
    return "RUN " + _exec_form([*shell, script]), body_end


def _run_script(body: str, tail: str, shell: list[str]) -> str:
    if tail:  # e.g. RUN <<EOF bash: the heredoc is the named program's stdin
        return "RUN " + _exec_form([*shell, f"{tail} <<'REPLAYKIT_HEREDOC'\n{body}REPLAYKIT_HEREDOC\n"])
    if body.startswith("#!"):
        script = (
            f"cat > {_SCRIPT} <<'REPLAYKIT_HEREDOC'\n{body}REPLAYKIT_HEREDOC\n"
            f"chmod +x {_SCRIPT} && {_SCRIPT}; rc=$?; rm -f {_SCRIPT}; exit $rc\n"
        )
        return "RUN " + _exec_form([*shell, script])
    return "RUN " + _exec_form([*shell, body])


def _copy(rest: str, markers: list[tuple[str, str, str]], bodies: list[str], where: str, lineno: int) -> str:
    words = _HEREDOC.sub(lambda m: f"\0{m.group(3)}", rest).split()
    flags = {m.group(1): m.group(2) for w in words if (m := _FLAG.match(w))}
    unknown = set(flags) - {"chmod", "chown"}
    if unknown:
        raise EnvError(f"{where}: line {lineno}: COPY --{sorted(unknown)[0]} with a heredoc is not supported")
    dest = next((w for w in reversed(words) if not w.startswith("--") and not w.startswith("\0")), None)
    sources = [w[1:] for w in words if w.startswith("\0")]
    if dest is None or not sources:
        raise EnvError(f"{where}: line {lineno}: COPY <<EOF needs a destination path")
    steps = []
    for (_strip, quote, word), body in zip(markers, bodies, strict=True):
        target = dest + word if dest.endswith("/") or len(sources) > 1 else dest
        delim = "REPLAYKIT_HEREDOC" if quote else "REPLAYKIT_HEREDOC_EXPAND"
        q = shlex.quote(target)
        steps.append(
            f'mkdir -p "$(dirname {q})" && cat > {q} <<{chr(39) + delim + chr(39) if quote else delim}\n{body}{delim}'
        )
        if "chmod" in flags:
            steps.append(f"chmod {shlex.quote(flags['chmod'])} {q}")
        if "chown" in flags:
            steps.append(f"chown {shlex.quote(flags['chown'])} {q}")
    return "RUN " + _exec_form(["/bin/sh", "-c", "set -e\n" + "\n".join(steps) + "\n"])
