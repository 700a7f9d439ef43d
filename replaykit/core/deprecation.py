"""Deprecated aliases: a public name that moved keeps working, with a warning, for one
minor version (the public API and the policy: docs/api.md).

A moved *module* keeps an alias module of two lines (``replaykit/cassette/tape.py``)::

    from replaykit.core.deprecation import moved
    from replaykit.capture.tape import *  # noqa: F403

A moved *name* keeps a module ``__getattr__`` in its old module (``replaykit/train/backends.py``)::

    def __getattr__(name: str) -> object:
        return moved_name(__name__, name)

``moved``/``moved_name`` warn (``DeprecationWarning``, pointing at the user's import line)
naming the new home and the version that drops the alias; ``tests/test_api.py`` fails once
the package version reaches that version while the alias is still there.
"""

from __future__ import annotations

import importlib
import warnings

#: alias module → (new module, version the alias is removed in)
MOVED: dict[str, tuple[str, str]] = {
    "replaykit.cassette.tape": ("replaykit.capture.tape", "0.2.0"),
    "replaykit.envs.grading": ("replaykit.envs.verifier", "0.2.0"),
}

#: (old module, name) → (the module defining it now, version the alias is removed in)
MOVED_NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("replaykit.train.backends", "ProposalSession"): ("replaykit.models.session", "0.2.0"),
    ("replaykit.core.records", "RunDoc"): ("replaykit.core.run_doc", "0.2.0"),
    ("replaykit.core.records", "EpisodeSummary"): ("replaykit.core.run_doc", "0.2.0"),
    ("replaykit.core.records", "VerdictDoc"): ("replaykit.core.verdict_doc", "0.2.0"),
    ("replaykit.core.records", "VerdictRecord"): ("replaykit.core.verdict_doc", "0.2.0"),
    ("replaykit.execution.executor", "Executor"): ("replaykit.execution.settings", "0.2.0"),
    ("replaykit.core.records", "EpochRecord"): ("replaykit.core.training_doc", "0.2.0"),
    ("replaykit.core.records", "PanelRuns"): ("replaykit.core.training_doc", "0.2.0"),
    ("replaykit.core.records", "TestsRecord"): ("replaykit.core.training_doc", "0.2.0"),
    ("replaykit.core.records", "AdaptiveRecord"): ("replaykit.core.training_doc", "0.2.0"),
    ("replaykit.core.records", "NamedParams"): ("replaykit.core.training_doc", "0.2.0"),
    ("replaykit.core.records", "PatchQueueDoc"): ("replaykit.core.training_doc", "0.2.0"),
    ("replaykit.core.records", "CounterfactualOf"): ("replaykit.core.training_doc", "0.2.0"),
}


def moved(alias: str) -> None:
    """Warn that ``alias`` (a module being imported) moved; call it from the alias module."""
    target, removed_in = MOVED[alias]
    warnings.warn(
        f"{alias} moved to {target}; import it from there (the old name goes in replaykit {removed_in})",
        DeprecationWarning,
        stacklevel=3,
    )


def moved_name(module: str, name: str) -> object:
    """``module.name`` for a name that moved (warned), for the module's ``__getattr__``;
    ``AttributeError`` for any other name, as a module without ``__getattr__`` raises."""
    if (module, name) not in MOVED_NAMES:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    target, removed_in = MOVED_NAMES[(module, name)]
    warnings.warn(
        f"{module}.{name} moved to {target}.{name}; import it from there "
        f"(the old name goes in replaykit {removed_in})",
        DeprecationWarning,
        stacklevel=3,
    )
    value: object = getattr(importlib.import_module(target), name)
    return value
