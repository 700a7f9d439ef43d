"""``replaykit view``: a local, read-only web app over the whole store (see README.md)."""
