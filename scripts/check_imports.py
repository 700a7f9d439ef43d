"""Import-cycle and layer check for replaykit, run by scripts/test.sh.

Every ``import`` of a replaykit module counts, lazy ones (inside functions) included;
only imports under ``if TYPE_CHECKING:`` are skipped (they never run). Fails when the
module graph has a cycle or when a layer imports one above it (``LAYERS``).

    python scripts/check_imports.py [--graph]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "replaykit"

#: Lower layers may not import the higher ones listed for them (prefix match).
LAYERS: dict[str, tuple[str, ...]] = {
    "replaykit.envs": (
        "replaykit.cassette",
        "replaykit.models",
        "replaykit.episodes.rollout",
        "replaykit.episodes.run",
        "replaykit.episodes.replay",
        "replaykit.train",
        "replaykit.episodes.certify",
        "replaykit.episodes.reexecute",
        "replaykit.cli",
        "replaykit.commands",
        "replaykit.report",
    ),
    "replaykit.models": (
        "replaykit.train",
        "replaykit.episodes.rollout",
        "replaykit.episodes.run",
        "replaykit.episodes.replay",
        "replaykit.episodes.certify",
        "replaykit.episodes.reexecute",
        "replaykit.cli",
        "replaykit.commands",
    ),
    "replaykit.cassette": (
        "replaykit.capture",
        "replaykit.exchange",
        "replaykit.models",
        "replaykit.train",
        "replaykit.episodes.rollout",
        "replaykit.episodes.run",
        "replaykit.episodes.replay",
        "replaykit.episodes.certify",
        "replaykit.episodes.reexecute",
        "replaykit.cli",
        "replaykit.commands",
        "replaykit.report",
        "replaykit.episodes.proxy_session",
    ),
    "replaykit.capture": (
        "replaykit.exchange",
        "replaykit.train",
        "replaykit.episodes.rollout",
        "replaykit.episodes.run",
        "replaykit.episodes.replay",
        "replaykit.episodes.certify",
        "replaykit.episodes.reexecute",
        "replaykit.cli",
        "replaykit.commands",
        "replaykit.report",
        "replaykit.episodes.proxy_session",
    ),
    "replaykit.exchange": (
        "replaykit.train",
        "replaykit.episodes.rollout",
        "replaykit.episodes.run",
        "replaykit.episodes.replay",
        "replaykit.episodes.certify",
        "replaykit.episodes.reexecute",
        "replaykit.cli",
        "replaykit.commands",
        "replaykit.episodes.proxy_session",
    ),
    "replaykit.episodes.rollout": (
        "replaykit.episodes.run",
        "replaykit.episodes.replay",
        "replaykit.train",
        "replaykit.episodes.certify",
        "replaykit.episodes.reexecute",
        "replaykit.cli",
        "replaykit.commands",
    ),
    "replaykit.episodes.run": ("replaykit.train", "replaykit.cli", "replaykit.commands"),
    "replaykit.episodes.replay": ("replaykit.train", "replaykit.cli", "replaykit.commands"),
    "replaykit.train": ("replaykit.cli", "replaykit.commands"),
    "replaykit.report": ("replaykit.cli", "replaykit.commands"),
    # the bottom layer imports nothing of replaykit outside itself
    "replaykit.core": tuple(
        f"replaykit.{p}"
        for p in (
            "capture",
            "cassette",
            "cli",
            "commands",
            "episodes",
            "exchange",
            "execution",
            "envs",
            "models",
            "render",
            "report",
            "train",
            "workspace",
            "pytest_plugin",
            "testing",
        )
    ),
    # executors run jobs; they never store, render or train
    "replaykit.execution": (
        "replaykit.cli",
        "replaykit.commands",
        "replaykit.render",
        "replaykit.report",
        "replaykit.train",
    ),
}


#: Deprecated aliases (``replaykit/core/deprecation.py``): a moved public module keeps its old
#: name for one minor version; the alias re-exports the new module and nothing else, so its
#: one import is exempt from the layer rules (it is never imported by replaykit itself).
ALIASES: dict[str, str] = {
    "replaykit.cassette.tape": "replaykit.capture.tape",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def target(mod: str) -> str | None:
        while mod and mod not in modules:
            mod = mod.rpartition(".")[0]
        return mod or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE):
                    found.add(target(alias.name) or alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.startswith(PACKAGE):
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else (target(base) or base))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(name)
    return {m for m in found if m in modules and m != PACKAGE}  # the root package is a lazy facade


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (ROOT / PACKAGE).rglob("*.py")}
    modules = set(files)
    return {name: imports_of(path, name, modules) for name, path in sorted(files.items())}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for alias, target in sorted(ALIASES.items()):
        if edges.get(alias, set()) - {target, "replaykit.core.deprecation"}:
            problems.append(f"{alias} (a deprecated alias) imports more than {target}")
        users = sorted(src for src, targets in edges.items() if alias in targets)
        if users:
            problems.append(f"{', '.join(users)} import(s) the deprecated alias {alias}; use {target}")
    for src, targets in sorted(edges.items()):
        if src in ALIASES:
            continue
        for layer, forbidden in LAYERS.items():
            if src == layer or src.startswith(layer + "."):
                for dst in sorted(targets):
                    if any(dst == f or dst.startswith(f + ".") for f in forbidden):
                        problems.append(f"{src} imports {dst} (a layer above {layer})")
    return problems


def main(argv: list[str]) -> int:
    edges = graph()
    if "--graph" in argv:
        for src, targets in edges.items():
            print(src, "->", ", ".join(sorted(targets)))
    found = cycles(edges)
    for comp in found:
        inner = [f"{a} -> {b}" for a in comp for b in sorted(edges[a]) if b in comp]
        print(f"import cycle among {len(comp)} modules: " + "; ".join(inner))
    layers = layer_violations(edges)
    for line in layers:
        print(f"layer violation: {line}")
    if found or layers:
        return 1
    print(f"imports ok: {len(edges)} modules, no cycle (lazy imports included), layers respected")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
