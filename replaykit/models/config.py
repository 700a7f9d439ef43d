"""A config's ``model`` section: the endpoint, the model's name and revision, and the
request parameters sent with every call (all of it part of the cassette key)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from replaykit.core.records import JSON


def _whole_number(value: Any) -> Any:
    """YAML's ``true`` is not the number 1 here: a boolean where a count or a seed belongs is a mistake."""
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, not {str(value).lower()}")
    return value


#: seeds are stored as SQLite integers and sent to endpoints: 0 to the largest signed 64-bit
Seed = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, le=2**63 - 1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelParams(_Strict):
    """Request parameters sent with every chat call (``ctx.llm_kwargs()``) and part of the key.

    ``seed`` fixes one seed for every call (default: a per-call seed derived from the run
    seed, task and call number); ``extra_body`` is merged into the request body as it is
    (e.g. llama.cpp's ``cache_prompt: false``)."""

    max_tokens: int | None = Field(default=None, ge=1)
    tool_choice: str | dict[str, object] | None = None  # a mapping: {type: function, function: {name}}
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: Seed | None = None
    stop: list[str] | None = Field(default=None, max_length=4)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    parallel_tool_calls: bool | None = None
    extra_body: dict[str, object] = Field(default_factory=dict)  # merged into the request body as is

    @field_validator("tool_choice")
    @classmethod
    def _named_function(cls, choice: Any) -> Any:
        if isinstance(choice, str) and choice not in ("auto", "none", "required"):
            raise ValueError(
                "tool_choice must be auto, none, required or {type: function, function: {name: NAME}}"
            )
        if isinstance(choice, dict):
            name = (choice.get("function") or {}).get("name") if choice.get("type") == "function" else None
            if not isinstance(name, str) or not name:
                raise ValueError(
                    "a tool_choice mapping must be {type: function, function: {name: NAME}}; or use auto, none, required"
                )
        return choice

    def sent(self) -> dict[str, JSON]:
        """What goes into each request (unset parameters are not sent)."""
        return self.model_dump(exclude_none=True, exclude_defaults=True)


class ModelPrice(_Strict):
    """What a model's tokens cost, in US dollars per million (Harbor's ``cost_usd``)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)

    def cost(self, n_input: int, n_output: int, n_cached: int = 0) -> float:
        """US dollars for these tokens (cached input at its own price when given)."""
        cached = self.cached_input_per_mtok if self.cached_input_per_mtok is not None else self.input_per_mtok
        return (
            (n_input - n_cached) * self.input_per_mtok + n_cached * cached + n_output * self.output_per_mtok
        ) / 1e6


class ModelConfig(_Strict):
    name: str = Field(default="reference-strong", min_length=1)
    base_url: str = Field(default="builtin", min_length=1)
    revision: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0, le=2)  # the range OpenAI-compatible endpoints take
    #: the total time one model call may take (connect to the last byte), in seconds
    timeout_s: float = Field(default=120.0, gt=0, le=3600)
    #: retries of a call that failed (refused, cut, timed out, 429/5xx), by the openai client
    max_retries: int = Field(default=0, ge=0, le=10)
    params: ModelParams = Field(default_factory=ModelParams)
    #: reuse cassettes recorded under another engine identity (what the server reports changed)
    accept_engine_change: bool = False
    #: refuse to record when the last saved probe of this engine was not deterministic (else: warn)
    require_deterministic: bool = False
    #: serve a new episode the answers of one recorded under another harness SHA while its requests
    #: and observations repeat it (prefix), or record every call (none); unset: prefix on a
    #: deterministic engine (the built-in server, or a saved probe says so), none elsewhere
    reuse: Literal["prefix", "none"] | None = None
    #: prices by model identity (a model's name, or ``name@revision``), for the cost a Harbor job
    #: reports; never in a key or a digest (left out of a dump when unset)
    pricing: dict[str, ModelPrice] | None = Field(default=None, exclude_if=lambda v: v is None)

    def price_of(self, name: str, revision: str = "") -> ModelPrice | None:
        """The price ``pricing`` gives the model ``name`` (at ``revision``), else None."""
        table = self.pricing or {}
        return (
            table.get(f"{name}@{revision}") if revision and f"{name}@{revision}" in table else table.get(name)
        )
