"""The outside agent as a harness: mini-swe-agent 2.4.6 (``pip install mini-swe-agent==2.4.6``)
with its own text-based configuration (``mini_textbased.yaml``: its system and instance prompts,
its ```mswea_bash_command parser, its observation and format-error messages, its exit on
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT), its ``DefaultAgent`` loop unchanged. Two seams are
replaced: its model's request goes through replaykit's recorded client (``llm``, with the config's
model parameters, as every arm's does) instead of litellm, and its commands run in the task's
container (``env.run``) instead of a local shell. So the agent arm is recorded, replayed, audited
and compared like any harness SHA: commit this file on a branch of the real-model harness repo
and name it in ``compare --harness agent=BRANCH``.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of a price list
os.environ.setdefault("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")  # a failed call is replaykit's to report
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

from importlib import resources

import yaml
from minisweagent.agents.default import DefaultAgent
from minisweagent.exceptions import Submitted
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

CONFIG = yaml.safe_load(resources.files("minisweagent.config").joinpath("mini_textbased.yaml").read_text())
DONE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class RecordedModel(LitellmTextbasedModel):
    """mini-swe-agent's text model; its one request goes through replaykit's client."""

    def __init__(self, llm, ctx, **config):
        super().__init__(**config)
        self.llm, self.ctx = llm, ctx

    def _query(self, messages, **kwargs):
        return self.llm.chat.completions.create(messages=messages, **self.ctx.llm_kwargs())

    def _calculate_cost(self, response):
        return {"cost": 0.0}  # a local engine: no price


class ContainerEnvironment:
    """mini-swe-agent's environment protocol over the task's container."""

    def __init__(self, env):
        self.env = env

    def execute(self, action, cwd="", *, timeout=None):
        obs = self.env.run(action.get("command", ""))
        output = {"output": obs.stdout + obs.stderr, "returncode": obs.exit_code, "exception_info": ""}
        lines = output["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == DONE and obs.exit_code == 0:
            submission = "".join(lines[1:])
            raise Submitted(
                {
                    "role": "exit",
                    "content": submission,
                    "extra": {"exit_status": "Submitted", "submission": submission},
                }
            )
        return output

    def get_template_vars(self, **kwargs):
        # what its prompt shows of the system: the container's, fixed (the host's uname would make
        # every request differ between machines)
        return {"system": "Linux", "release": "", "version": "", "machine": "x86_64", **kwargs}

    def serialize(self):
        return {}


def solve(task, env, llm, ctx):
    model_config = {k: v for k, v in CONFIG["model"].items() if k != "model_kwargs"}
    model = RecordedModel(llm, ctx, model_name=ctx.llm_kwargs()["model"], **model_config)
    agent_config = {**CONFIG["agent"], "step_limit": int(ctx.params.get("max_steps", 3)), "cost_limit": 0}
    result = DefaultAgent(model, ContainerEnvironment(env), **agent_config).run(task.instruction)
    return result.get("submission") or result.get("exit_status")
