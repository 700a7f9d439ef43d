"""``python -m replaykit.testing.tiny_model tiny.gguf [--seed N] [--json]``: write the tiny
random-weight llama GGUF that tests serve. The writer is ``replaykit.models.tiny_model``
(``write_tiny_model``), beside the other model files an engine serves."""

from __future__ import annotations

from replaykit.models.tiny_model import main

if __name__ == "__main__":
    raise SystemExit(main())
