"""Model backends: OpenAI-compatible endpoints, the Codex agent, the reference server."""
