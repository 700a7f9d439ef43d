"""Named registries with entry points: the one mechanism behind every extension point.

Each layer keeps its own registry beside the protocol it extends (environments in
``envs/registry.py``, criteria in ``train/criteria.py``, ...). A registry knows its
built-ins lazily (``"name": "module:attribute"``, imported on first use), anything
registered in-process with ``register(name, obj)``, and anything another installed
package declares under the registry's entry-point group::

    [project.entry-points."replaykit.criteria"]
    my_criterion = "my_pkg.criteria:MyCriterion"

Looking a name up never imports more than the one module that provides it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from replaykit.core.errors import ConfigError, ReplaykitError

T = TypeVar("T")


def load_ref(ref: str) -> object:
    """``"package.module:attribute"`` → the attribute."""
    module, _, attr = ref.partition(":")
    obj: object = import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Name → object for one extension point (``what`` names it in error messages)."""

    def __init__(
        self,
        what: str,
        group: str,
        builtins: dict[str, str] | None = None,
        convert: Callable[[str, object], T] | None = None,
        error: type[ReplaykitError] = ConfigError,
    ) -> None:
        self.what = what
        self.group = group
        self._builtins = dict(builtins or {})
        self._convert = convert
        self._error = error
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: object) -> T:
        item = self._convert(name, obj) if self._convert else obj
        self._items[name] = item  # type: ignore[assignment]
        return item  # type: ignore[return-value]

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def _entry_point(self, name: str) -> object | None:
        for ep in entry_points(group=self.group):
            if ep.name == name:
                try:
                    return ep.load()
                except Exception as exc:  # a broken third-party package: one clear line
                    raise self._error(
                        f"{self.what} {name!r} from entry point {ep.value!r} failed to load: {exc}"
                    ) from None
        return None

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if name in self._builtins:
            return self.register(name, load_ref(self._builtins[name]))
        obj = self._entry_point(name)
        if obj is not None:
            return self.register(name, obj)
        raise self._error(f"unknown {self.what} {name!r}; known: {', '.join(self.names())}")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def names(self) -> list[str]:
        """Every name this registry can resolve (built-in, registered, installed)."""
        return sorted({*self._builtins, *self._items, *(ep.name for ep in entry_points(group=self.group))})
