"""Import-cycle, layer and re-export check for replaykit, run by scripts/test.sh and land.sh.

Every ``import`` of a replaykit module counts: lazy ones (inside functions) and type-only
ones (under ``if TYPE_CHECKING:``) too. The check fails on:

* an **import cycle** among the modules' runtime imports;
* a **type-only import loop**: a cycle that closes only through ``TYPE_CHECKING`` imports
  (it runs nowhere, but the modules still cannot be read, typed or moved apart);
* a module on **no part** of ``docs/layers-whiteboard.json`` (every module is on exactly one);
* an import between parts that the whiteboard says must **NEVER** be, or that ``MAY`` does
  not list (the allowed arrows between parts), type-only imports included;
* an import that breaks the finer rules inside and between packages (``LAYERS``);
* a **re-export**: ``from X import N`` where X only imports N (import it from the module that
  defines it; replaykit's own ``__init__`` is the public facade and is exempt), in replaykit,
  tests/ and benchmarks/.

A registry's built-ins (``"replaykit.envs.local:ENV"``) are imported by name when first asked
for: they count for cycles, not for parts (a registry is where built-in kinds are named).

    python scripts/check_imports.py [--graph]
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "replaykit"
WHITEBOARD = ROOT / "docs" / "layers-whiteboard.json"
#: where re-export sites are looked for besides the package
SITE_DIRS = ("tests", "benchmarks")
#: packages whose ``__init__`` is a facade by design (the public names, imported lazily)
FACADES = {"replaykit", "replaykit.render"}

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
    "replaykit.envs.grading": "replaykit.envs.verifier",
}

#: The arrows allowed between parts of docs/layers-whiteboard.json (part -> parts it may import),
#: type-only imports included. A part imports itself freely; an arrow not listed is refused.
MAY: dict[str, set[str]] = {
    "Core": set(),
    "Templates": set(),  # a user's harness scaffold: it is handed task, env, llm, ctx
    "EnvCore": {"Core"},
    "DockerKind": {"EnvCore", "Core"},
    "Cassette": {"EnvCore", "Core"},
    "Capture": {"Cassette", "Core"},
    "Models": {"Capture", "Cassette", "Core"},
    "Execution": {"EnvCore", "Core"},
    "Agents": {"EnvCore", "Core"},  # named outside agents: registry, bridge, their harness templates
    "Exchange": {"Cassette", "EnvCore", "Core"},  # EnvCore: kinds' bundle artefacts, by the registry
    "Episodes": {"Agents", "Models", "Capture", "Cassette", "Execution", "EnvCore", "Core"},
    "Train": {"Episodes", "Models", "Capture", "Cassette", "Execution", "Core"},
    "Testing": {"Episodes", "Models", "Capture", "Cassette", "Core"},  # Models: engines and model files
    "Workspace": {"Agents", "Episodes", "Cassette", "DockerKind", "EnvCore", "Core"},
    "Views": {
        "Workspace",
        "Train",
        "Episodes",
        "Exchange",
        "Models",
        "Cassette",
        "DockerKind",
        "EnvCore",
        "Core",
    },
    "Face": {
        "Agents",
        "Views",
        "Workspace",
        "Train",
        "Episodes",
        "Exchange",
        "Execution",
        "Models",
        "Cassette",
        "DockerKind",
        "EnvCore",
        "Core",
    },
    "Facade": {"Agents", "Train", "Episodes", "Execution", "Models", "Cassette", "EnvCore", "Core"},
}

#: NEVER rules of the whiteboard still broken, each while its owner moves the code (issue 30):
#: reported, not failed. Once one holds, the check fails until its line goes.
PENDING_NEVERS: dict[tuple[str, str], str] = {}

#: Type-only import loops being broken by their owners (issue 30), by the package holding them:
#: reported, not failed. Once one is gone, the check fails until its line goes.
PENDING_LOOPS: dict[str, str] = {}


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


def _from_base(node: ast.ImportFrom, package: str) -> str:
    base = node.module or ""
    if node.level:
        base = ".".join(
            package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
        )
    return base


def _imports(path: Path, name: str, modules: set[str]) -> tuple[set[str], set[str]]:
    """(runtime imports, type-only imports) of one module, as modules of ``modules``."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    runtime: set[str] = set()
    typed: set[str] = set()

    def visit(node: ast.AST, found: set[str]) -> None:
        if isinstance(node, ast.If) and is_type_checking(node):
            for child in node.body:
                visit(child, typed)
            for child in node.orelse:
                visit(child, found)
            return
        found |= _named(node, package, modules)
        for child in ast.iter_child_nodes(node):
            visit(child, found)

    visit(tree, runtime)
    keep = {m for m in modules if m != PACKAGE} - {name}  # the root package is a lazy facade
    return runtime & keep, (typed - runtime) & keep


def _target(mod: str, modules: set[str]) -> str | None:
    """The module of ``modules`` that ``mod`` (a module or a name in one) is, or is in."""
    while mod and mod not in modules:
        mod = mod.rpartition(".")[0]
    return mod or None


def _named(node: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The replaykit modules an import statement names (none for any other node)."""
    if isinstance(node, ast.Import):
        return {_target(a.name, modules) or a.name for a in node.names if a.name.startswith(PACKAGE)}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = _from_base(node, package)
    if not base.startswith(PACKAGE):
        return set()
    subs = (f"{base}.{alias.name}" for alias in node.names)
    return {sub if sub in modules else (_target(base, modules) or base) for sub in subs}


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The replaykit modules ``path`` imports when it runs (lazy imports included)."""
    return _imports(path, name, modules)[0]


def type_imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The replaykit modules ``path`` imports only under ``if TYPE_CHECKING:``."""
    return _imports(path, name, modules)[1]


def _files() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def graph() -> dict[str, set[str]]:
    """Runtime imports: module -> the modules it imports."""
    files = _files()
    modules = set(files)
    return {name: imports_of(path, name, modules) for name, path in files.items()}


def typed_graph() -> dict[str, set[str]]:
    """Type-only imports: module -> the modules it imports only under ``TYPE_CHECKING``."""
    files = _files()
    modules = set(files)
    return {name: type_imports_of(path, name, modules) for name, path in files.items()}


BUILTIN = re.compile(r"""["'](replaykit(?:\.\w+)+):\w+["']""")


def registry_builtins() -> dict[str, set[str]]:
    """Modules named as a registry's built-ins (``"replaykit.envs.local:ENV"``), by module."""
    files = _files()
    found: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = {m for m in BUILTIN.findall(path.read_text()) if m in files and m != name}
        if targets:
            found[name] = targets
    return found


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
            comp = _pop_component(stack, on, v)
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def _pop_component(stack: list[str], on: set[str], root: str) -> list[str]:
    """Tarjan's step: the modules on ``stack`` down to ``root``, taken off it."""
    comp = []
    while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == root:
            return comp


def _union(*graphs: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for g in graphs:
        for src, targets in g.items():
            out.setdefault(src, set()).update(targets)
    return out


def type_only_loops(runtime: dict[str, set[str]], typed: dict[str, set[str]]) -> list[str]:
    """Each loop that closes only through type-only imports, as one line naming its arrows."""
    runtime_loops = {tuple(c) for c in cycles(runtime)}
    full = _union(runtime, typed)
    lines = []
    for comp in cycles(full):
        if tuple(comp) in runtime_loops:
            continue
        inner = [
            f"{a} -> {b}" + (" (type-only)" if b in typed.get(a, ()) else "")
            for a in comp
            for b in sorted(full[a])
            if b in comp
        ]
        lines.append(f"type-only import loop among {len(comp)} modules: " + "; ".join(inner))
    return lines


# -- parts: docs/layers-whiteboard.json ------------------------------------------------


def whiteboard() -> tuple[dict[str, list[str]], list[tuple[str, str, str]]]:
    """(part -> the paths it is, NEVER rules as (from, to, why)) of the layers whiteboard."""
    doc = json.loads(WHITEBOARD.read_text())
    parts = {name: list(part["is"]) for name, part in doc["parts"].items()}
    nevers = [(a, b, why) for a, b, why in doc.get("never", [])]
    return parts, nevers


def _module_path(module: str) -> Iterable[str]:
    """The file paths (from the root) a module may be named by in the whiteboard."""
    path = module.replace(".", "/")
    yield f"{path}.py"
    yield f"{path}/__init__.py"


def part_of(module: str, parts: dict[str, list[str]]) -> list[str]:
    """The parts whose paths hold ``module`` most closely: a folder ``x/`` holds everything below
    it, and the longest path that holds a file has it (``x/`` beside ``x/y/`` is the rest of x),
    as the whiteboard's drawing reads it. Two parts naming the same path both come back."""
    best: dict[str, int] = {}
    for name, paths in parts.items():
        for file in _module_path(module):
            for p in paths:
                if file == p or (p.endswith("/") and file.startswith(p)):
                    best[name] = max(best.get(name, 0), len(p))
    longest = max(best.values(), default=0)
    return [name for name, length in best.items() if length == longest]


def part_violations(
    runtime: dict[str, set[str]],
    typed: dict[str, set[str]],
    parts: dict[str, list[str]],
    nevers: list[tuple[str, str, str]],
    pending: dict[tuple[str, str], str] | None = None,
) -> tuple[list[str], list[str]]:
    """(problems, notes): modules on no part or on two, arrows the whiteboard refuses (a
    NEVER, or one ``MAY`` does not list); notes name the pending NEVERs still broken."""
    pending = PENDING_NEVERS if pending is None else pending
    problems, placed = _placed(sorted(_union(runtime, typed)), parts)
    why = {(a, b): w for a, b, w in nevers}
    broken: dict[tuple[str, str], list[str]] = {}
    for edge, a, b in _part_edges(runtime, typed, placed):
        if (a, b) in why:
            broken.setdefault((a, b), []).append(edge)
        elif b not in MAY.get(a, set()):
            problems.append(f"{edge}: part {a} may not import part {b} (MAY in scripts/check_imports.py)")
    notes = []
    for (a, b), edges in sorted(broken.items()):
        line = f"never {a} -> {b} ({why[(a, b)]}): " + "; ".join(edges)
        if (a, b) in pending:
            notes.append(f"pending, {pending[(a, b)]}: {line}")
        else:
            problems.append(line)
    for a, b in sorted(set(pending) - set(broken)):
        problems.append(
            f"never {a} -> {b} holds now: remove it from PENDING_NEVERS in scripts/check_imports.py"
        )
    return problems, notes


def _placed(modules: list[str], parts: dict[str, list[str]]) -> tuple[list[str], dict[str, str]]:
    """(problems, module -> its part): a module on no part or on two is a problem."""
    problems: list[str] = []
    placed: dict[str, str] = {}
    for module in modules:
        found = part_of(module, parts)
        if len(found) != 1:
            where = "no part" if not found else f"{len(found)} parts ({', '.join(found)})"
            problems.append(
                f'{module} is on {where} of {WHITEBOARD.name}: name it in exactly one part\'s "is"'
            )
        if found:
            placed[module] = found[0]
    return problems, placed


def _part_edges(
    runtime: dict[str, set[str]], typed: dict[str, set[str]], placed: dict[str, str]
) -> Iterable[tuple[str, str, str]]:
    """Each import between two parts (an alias's own import aside): its line, from part, to part."""
    for kind, edges in (("imports", runtime), ("imports (type-only)", typed)):
        for src, targets in sorted(edges.items()):
            for dst in sorted(targets):
                a, b = placed.get(src), placed.get(dst)
                if a is None or b is None or a == b or src in ALIASES:
                    continue
                yield f"{src} {kind} {dst}", a, b


def pending_loops(loops: list[str], pending: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes): type-only loops not pending, and pending entries whose loop is gone."""
    pending = PENDING_LOOPS if pending is None else pending
    problems, notes, seen = [], [], set()
    for line in loops:
        modules = re.findall(r"(replaykit[\w.]*) ->", line)
        owner = next(
            (p for p in pending if all(m == p or m.startswith(p + ".") for m in modules)),
            None,
        )
        if owner is None:
            problems.append(line)
        else:
            seen.add(owner)
            notes.append(f"pending, {pending[owner]}: {line}")
    for gone in sorted(set(pending) - seen):
        problems.append(
            f"the type-only loop in {gone} is gone: remove it from PENDING_LOOPS in scripts/check_imports.py"
        )
    return problems, notes


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


# -- re-exports: imports name the defining module ------------------------------------


def _bindings(path: Path) -> tuple[set[str], set[str]]:
    """(names a module defines, names it only imports) at its top level, TYPE_CHECKING included."""
    tree = ast.parse(path.read_text(), str(path))
    defined: set[str] = set()
    imported: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.ImportFrom):
                imported.update(a.asname or a.name for a in node.names if a.name != "*")
            elif isinstance(node, ast.Import):
                imported.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return defined, imported - defined


def reexports(files: dict[str, Path] | None = None, sites: Iterable[Path] | None = None) -> list[str]:
    """``from X import N`` (in replaykit, tests/, benchmarks/) where module X only imports N."""
    files = _files() if files is None else files
    if sites is None:
        sites = [p for d in (PACKAGE, *SITE_DIRS) for p in sorted((ROOT / d).rglob("*.py"))]
    bindings: dict[str, tuple[set[str], set[str]]] = {}
    problems = []
    for path in sites:
        tree = ast.parse(path.read_text(), str(path))
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _from_base(node, package)
            if base not in files or base in FACADES or base in ALIASES:
                continue
            if base not in bindings:
                bindings[base] = _bindings(files[base])
            only_imported = bindings[base][1]
            for alias in node.names:
                if alias.name in only_imported and f"{base}.{alias.name}" not in files:
                    rel = path.relative_to(ROOT)
                    problems.append(
                        f"{rel}:{node.lineno} imports {alias.name} from {base}, which only re-exports it: "
                        "import it from the module that defines it"
                    )
    return problems


def main(argv: list[str]) -> int:
    runtime, typed = graph(), typed_graph()
    if "--graph" in argv:
        for src in sorted(runtime):
            kinds = [*sorted(runtime[src]), *(f"{t} (type-only)" for t in sorted(typed.get(src, ())))]
            print(src, "->", ", ".join(kinds))
    problems: list[str] = []
    named = _union(runtime, registry_builtins())
    for comp in cycles(named):
        inner = [f"{a} -> {b}" for a in comp for b in sorted(named[a]) if b in comp]
        problems.append(f"import cycle among {len(comp)} modules: " + "; ".join(inner))
    loop_problems, notes = pending_loops(type_only_loops(named, typed))
    problems += loop_problems
    parts, nevers = whiteboard()
    part_problems, part_notes = part_violations(runtime, typed, parts, nevers)
    problems += part_problems + [f"layer violation: {line}" for line in layer_violations(runtime)]
    problems += reexports()
    for line in notes + part_notes:
        print(line)
    for line in problems:
        print(line)
    if problems:
        return 1
    print(
        f"imports ok: {len(runtime)} modules on {len(parts)} parts, no cycle (lazy and type-only imports "
        f"included; {len(notes)} pending), layers and NEVERs respected ({len(part_notes)} pending), no re-export"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
