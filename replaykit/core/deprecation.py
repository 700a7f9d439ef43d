"""Deprecated aliases: a public name that moved keeps working, with a warning, for one
minor version (the public API and the policy: docs/api.md).

An alias module is two lines (``replaykit/cassette/tape.py``)::

    from replaykit.core.deprecation import moved
    from replaykit.capture.tape import *  # noqa: F403

``moved`` warns (``DeprecationWarning``, pointing at the user's import line) naming the
new home and the version that drops the alias; ``tests/test_api.py`` fails once the
package version reaches that version while the alias is still there.
"""

from __future__ import annotations

import warnings

#: alias module → (new module, version the alias is removed in)
MOVED: dict[str, tuple[str, str]] = {
    "replaykit.cassette.tape": ("replaykit.capture.tape", "0.2.0"),
}


def moved(alias: str) -> None:
    """Warn that ``alias`` (a module being imported) moved; call it from the alias module."""
    target, removed_in = MOVED[alias]
    warnings.warn(
        f"{alias} moved to {target}; import it from there (the old name goes in replaykit {removed_in})",
        DeprecationWarning,
        stacklevel=3,
    )
