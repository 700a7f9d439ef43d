"""The typed public facade: ``import replaykit`` is lazy, and type checkers see real classes."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import replaykit

INIT = Path(replaykit.__file__)


def test_all_is_literal_and_every_name_resolves() -> None:
    tree = ast.parse(INIT.read_text())
    literal = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    )
    assert isinstance(literal, ast.List) and all(isinstance(e, ast.Constant) for e in literal.elts)
    for name in replaykit.__all__:
        obj = getattr(replaykit, name)
        assert getattr(obj, "__name__", name) == name


def test_type_checking_block_imports_exactly_the_public_names() -> None:
    tree = ast.parse(INIT.read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
    )
    imported = {
        alias.asname or alias.name
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == set(replaykit.__all__)


def test_import_is_lazy_and_py_typed_ships() -> None:
    code = "import sys, replaykit; print(any(m.startswith('replaykit.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert (INIT.parent / "py.typed").is_file()


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        replaykit.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_the_render_facade_names_each_renderer_once_and_loads_it_on_use() -> None:
    """``replaykit.render`` imports a renderer's module when it is first asked for (a listing
    command loads only its own); its ``TYPE_CHECKING`` block and ``_EXPORTS`` name the same
    things, each at the module that defines it."""
    from replaykit import render

    init = INIT.parent / "render" / "__init__.py"
    block = next(
        n
        for n in ast.parse(init.read_text()).body
        if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"
    )
    typed = {
        alias.name: f"replaykit.render.{alias.name}"
        if node.module == "replaykit.render"
        else str(node.module)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == render._EXPORTS and render.__all__ == sorted(typed)
    for name, module in typed.items():
        value = getattr(render, name)
        assert value is (
            sys.modules[module] if module.endswith(f".{name}") else getattr(sys.modules[module], name)
        )
    code = "import sys; from replaykit import render; render.line; print(sorted(m for m in sys.modules if m.startswith('replaykit.render.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['replaykit.render.console']"
