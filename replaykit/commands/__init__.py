"""The bodies of the ``replaykit`` commands (one module per concern, registered in ``replaykit/cli.py``) and how the CLI runs."""
