"""The reference model server: a documented, deterministic OpenAI-compatible simulator.

See ``README.md`` in this folder; the server is :class:`replaykit.models.reference.server.ReferenceServer`.
Importing this package starts nothing.
"""
