"""Named agents: outside agents run as an episode's harness (``replaykit/agents/README.md``)."""
