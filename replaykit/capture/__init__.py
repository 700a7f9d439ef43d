"""Capture and replay: request matchers, the tape, the vcrpy recorder and its stubs,
the recording proxy and its concurrent-conversation replay. See README.md."""
