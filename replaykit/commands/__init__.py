"""CLI plumbing and the commands that are not a thin wrapper of one library call."""
