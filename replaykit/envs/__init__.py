"""Environments: where an episode's actions run and where its outcome is graded.

``base`` holds the protocol (Observation, Grade, Environment); ``tasks`` loads task
folders in the Harbor layout (``load_task``, ``load_panel``); ``local`` runs a task in
a workspace folder on this machine (``LocalEnv``); ``registry`` names the environment
kinds (``register_env``, ``make_env``; built-ins local and docker, entry points ``replaykit.envs``).
"""
