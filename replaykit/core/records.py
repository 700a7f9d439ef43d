"""``JSON``, a value as stored, and the deprecated aliases of the stored documents' old home.

The store keeps documents as canonical JSON, each one pydantic model (``core/document.py``):
a run (``RunDoc``, kind ``measure``) and its rows in ``core/run_doc.py``, a verdict
(``VerdictDoc``, ``VerdictRecord``) in ``core/verdict_doc.py``, a training (``TrainingDoc``,
its epochs ``EpochRecord`` and their parts) in ``core/training_doc.py``, a compare result in
``core/compare_doc.py``; an episode's ``meta`` is ``core/meta.py``'s ``EpisodeMeta``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: a JSON value as stored (canonical JSON): what parameters and metrics may hold
#: (read-only containers, so a ``list[str]`` is one)
JSON = str | int | float | bool | None | Sequence["JSON"] | Mapping[str, "JSON"]


def __getattr__(name: str) -> object:
    """``RunDoc`` and ``EpisodeSummary`` moved to ``core/run_doc.py``, ``VerdictDoc`` and
    ``VerdictRecord`` to ``core/verdict_doc.py``, ``EpochRecord`` and the training's other
    parts to ``core/training_doc.py`` (deprecated aliases)."""
    from replaykit.core.deprecation import moved_name

    return moved_name(__name__, name)
