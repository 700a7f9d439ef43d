"""Episodes and runs: the config, the harness contract, one rollout, measuring and
replaying a panel, certification, compare, and proxy sessions."""
