"""Named registries with entry points: the one mechanism behind every extension point.

Each layer keeps its own registry beside the protocol it extends (environments in
``envs/registry.py``, criteria in ``train/criteria.py``, ...). A registry knows its
built-ins lazily (``"name": "module:attribute"``, imported on first use), anything
registered in-process with ``register(name, obj)``, and anything another installed
package declares under the registry's entry-point group::

    [project.entry-points."replaykit.criteria"]
    my_criterion = "my_pkg.criteria:MyCriterion"

Looking a name up never imports more than the one module that provides it.
A :class:`FactoryRegistry` holds factories of one type: ``create(name, **params)``
validates the parameters strictly against the factory's signature (an unknown or missing
name, or a value not of its annotated type, is one line; ``"2"`` is not an ``int``),
calls the factory with the *validated* values (a JSON list for a ``tuple`` parameter
arrives as a tuple, a dict for a pydantic-model parameter as that model) and returns
what it built, typed; an error raised inside the constructor itself propagates untouched,
with its traceback. ``validate(name, params)`` is the same check without the call (what
a config's load does). ``entries()`` says what is registered and where from
(``replaykit plugins``).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from replaykit.core.errors import ConfigError, ReplaykitError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from pydantic import TypeAdapter

T = TypeVar("T")
P = TypeVar("P")

Source = Literal["built-in", "entry point", "registered"]


@dataclass(frozen=True)
class RegistryEntry:
    """One name of a registry and where it comes from (nothing is imported to say so)."""

    name: str
    source: Source
    ref: str  # ``module:attribute``
    distribution: str = ""  # the installed package declaring the entry point (``name version``)
    shadows: str = ""  # an entry point of the same name this one hides (it is never used)


def entry_points(group: str) -> list[EntryPoint]:
    """The installed entry points of ``group`` (importlib.metadata is loaded when first asked:
    a built-in name never needs it)."""
    from importlib.metadata import entry_points as installed

    return list(installed(group=group))


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
        self._origins: dict[str, RegistryEntry] = {}

    def register(self, name: str, obj: object) -> T:
        item = self._convert(name, obj) if self._convert else obj
        self._items[name] = item  # type: ignore[assignment]
        self._origins.pop(name, None)
        return item  # type: ignore[return-value]

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)
        self._origins.pop(name, None)

    def _entry_point(self, name: str) -> tuple[EntryPoint, object] | None:
        for ep in entry_points(group=self.group):
            if ep.name == name:
                try:
                    return ep, ep.load()
                except Exception as exc:  # a broken third-party package: one clear line
                    raise self._error(
                        f"{self.what} {name!r} from entry point {ep.value!r} failed to load: {exc}"
                    ) from None
        return None

    def get(self, name: str) -> T:
        if name in self._items:
            return self._items[name]
        if name in self._builtins:
            item = self.register(name, load_ref(self._builtins[name]))
            self._origins[name] = RegistryEntry(name, "built-in", self._builtins[name])
            return item
        found = self._entry_point(name)
        if found is not None:
            item = self.register(name, found[1])
            self._origins[name] = _from_entry_point(found[0])
            return item
        raise self._error(f"unknown {self.what} {name!r}; known: {', '.join(self.names())}")

    def entries(self) -> list[RegistryEntry]:
        """Every name this registry resolves, with the source ``get`` would use."""
        eps = {ep.name: ep for ep in entry_points(group=self.group)}
        rows = []
        for name in self.names():
            ep = eps.get(name)
            if name in self._origins:
                row = self._origins[name]
            elif name in self._items:
                row = _registered(name, self._items[name])
            elif name in self._builtins:
                row = RegistryEntry(name, "built-in", self._builtins[name])
            else:
                assert ep is not None
                row = _from_entry_point(ep)
            if ep is not None and row.source != "entry point":
                row = RegistryEntry(row.name, row.source, row.ref, row.distribution, shadows=ep.value)
            rows.append(row)
        return rows

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        # a built-in or registered name is known without scanning the installed packages
        return name in self._items or name in self._builtins or name in self.names()

    def names(self) -> list[str]:
        """Every name this registry can resolve (built-in, registered, installed)."""
        return sorted({*self._builtins, *self._items, *(ep.name for ep in entry_points(group=self.group))})


class FactoryRegistry(Registry[Callable[..., P]]):
    """A registry of factories that build a ``P`` (criteria, optimizers, estimators, ...)."""

    def factory(self, name: str) -> Callable[..., P]:
        factory = self.get(name)
        if not callable(factory):
            raise self._error(f"{self.what} {name!r} is not a factory ({type(factory).__name__})")
        return factory

    def validate(self, name: str, params: Mapping[str, object]) -> dict[str, object]:
        """``params`` validated strictly against ``name``'s factory: the values the factory
        is called with; anything wrong is one line (this registry's error)."""
        return check_params(f"{self.what} {name!r}", self.factory(name), params, self._error)

    def create(self, name: str, /, **params: Any) -> P:
        """Build ``name`` from its factory with ``params`` validated first (``validate``); an
        error the constructor raises is not caught."""
        return self.factory(name)(**self.validate(name, params))


def _from_entry_point(ep: EntryPoint) -> RegistryEntry:
    dist = getattr(ep, "dist", None)
    label = f"{dist.name} {dist.version}" if dist is not None else ""
    return RegistryEntry(ep.name, "entry point", ep.value, label)


def _registered(name: str, obj: object) -> RegistryEntry:
    target = getattr(obj, "factory", obj)  # an EnvKind names its factory
    module = str(getattr(target, "__module__", "") or "")
    ref = f"{module}:{getattr(target, '__qualname__', type(target).__qualname__)}"
    return RegistryEntry(name, "built-in" if module.split(".")[0] == "replaykit" else "registered", ref)


def check_params(
    what: str, factory: Callable[..., object], params: Mapping[str, object], error: type[ReplaykitError]
) -> dict[str, object]:
    """``params`` bound to ``factory``'s signature, each value validated strictly against its
    annotation (where pydantic can take the annotation): the validated values, by name;
    otherwise one line naming the parameter."""
    from pydantic import TypeAdapter, ValidationError  # here, not at import: a look-up by name needs none

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no introspectable signature: the call itself decides
        return dict(params)
    accepted = [
        p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    try:
        bound = signature.bind(**params)
    except TypeError as exc:
        unknown = [k for k in params if k not in signature.parameters]
        takes = ", ".join(accepted) or "no parameters"
        if unknown and not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
            raise error(f"{what}: unknown parameter {unknown[0]!r} (takes: {takes})") from None
        raise error(f"{what}: {exc} (takes: {takes})") from None
    hints = _hints(factory)
    validated: dict[str, object] = dict(params)
    for key, value in bound.arguments.items():
        annotation = hints.get(key)
        if annotation is None or signature.parameters[key].kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        except Exception:  # an annotation pydantic cannot check (a protocol, a forward name)
            continue
        try:
            validated[key] = _strict(adapter, value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            message = str(first["msg"]).removeprefix("Value error, ")
            got = "" if isinstance(value, Mapping) else f" (got {value!r})"
            raise error(
                f"{what}: parameter {key!r}{f' ({where})' if where else ''}: {message}{got}"
            ) from None
    return validated


def _strict(adapter: TypeAdapter[Any], value: object) -> Any:
    """``value`` validated strictly: config data (JSON-like) as JSON, so a list may fill a
    tuple and a string a path, but ``"2"`` never becomes an int; anything else as is."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return adapter.validate_python(value, strict=True)
    return adapter.validate_json(text, strict=True)


def _hints(factory: Callable[..., object]) -> dict[str, Any]:
    """The factory's parameter annotations, resolved (typing objects: what ``TypeAdapter`` takes)."""
    target = factory.__init__ if isinstance(factory, type) else factory  # type: ignore[misc]
    try:
        return typing.get_type_hints(target)
    except Exception:  # a name only importable under TYPE_CHECKING: skip value checks
        return {}
