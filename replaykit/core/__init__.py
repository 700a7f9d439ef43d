"""The lowest layer: errors, determinism pins, registries, typed records, progress
events, tool versions, stale-scratch cleanup and loopback HTTP plumbing. Imports no
other replaykit package."""
