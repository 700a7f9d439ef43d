"""Optimizers, one implementation per file; the protocol and registry live in ``replaykit.train.optimizers``."""
