"""What a probe's outcome means, and what to set on the engine that produced it.

Three cases: ``seed_not_honoured`` (serial replies differ at a fixed seed: the engine
drops or re-seeds the seed, or — at temperature 0 — reuses state such as a prompt
cache), ``load_dependent`` (serial replies agree, concurrent ones differ: batching or
an RNG shared across requests), ``deterministic``. The engine comes from its measured
identity (``models.identity``): ``llama.cpp``, ``llama-cpp-python``, ``vllm``,
``sglang``; unknown engines get every engine's advice.
"""

from __future__ import annotations

SEED_NOT_HONOURED = "seed_not_honoured"
LOAD_DEPENDENT = "load_dependent"
DETERMINISTIC = "deterministic"

_SEED: dict[str, str] = {
    "llama-cpp-python": (
        "llama-cpp-python: its chatml-function-calling format drops `seed` (and hides tool results from "
        "the prompt): decode at temperature 0, or serve with llama.cpp's own llama-server, which honours "
        "`seed` (`replaykit engine start`)"
    ),
    "llama.cpp": (
        "llama.cpp: send `seed` with each request (model.params.seed or the per-call seed) and turn off "
        "prompt-cache reuse (--no-cache-prompt --cache-ram 0; `replaykit engine start` sets both)"
    ),
    "vllm": "vLLM: send `seed` per request (vLLM honours it) or decode at temperature 0",
    "sglang": "SGLang: send `sampling_seed`/`seed` per request with --enable-deterministic-inference",
    "transformers": (
        "transformers serve: one global RNG is shared across requests, so a per-request seed does not pin "
        "a reply; decode at temperature 0"
    ),
}
_LOAD: dict[str, str] = {
    "llama-cpp-python": (
        "llama-cpp-python: one request at a time (executor.workers: 1); it reuses the previous prompt's "
        "cache and ignores cache_prompt: false, so serve with llama-server --parallel 1 --no-cache-prompt "
        "(`replaykit engine start`) for concurrent runs"
    ),
    "llama.cpp": (
        "llama.cpp: one slot (--parallel 1) and no prompt-cache reuse (--no-cache-prompt --cache-ram 0): "
        "batch size and cache reuse change the floating-point order; `replaykit engine start` sets both"
    ),
    "vllm": "vLLM: batch-invariant kernels (VLLM_BATCH_INVARIANT=1), or concurrency 1",
    "sglang": "SGLang: --enable-deterministic-inference (batch-invariant kernels), or concurrency 1",
    "transformers": (
        "transformers serve: one request at a time (executor.workers: 1): concurrent requests share one RNG"
    ),
}
_GENERIC_SEED = (
    "outputs differ even one request at a time: send temperature 0 (greedy decoding) and a fixed seed, "
    "and check that the server honours `seed`"
)
_GENERIC_LOAD = (
    "outputs depend on concurrent load (batching or a shared RNG): decode serially (concurrency 1 / "
    "max batch size 1), or use a batch-invariant mode (vLLM: VLLM_BATCH_INVARIANT=1; SGLang: "
    "--enable-deterministic-inference; llama.cpp: --parallel 1 --no-cache-prompt)"
)


def classify(distinct_serial: int, load_varies: bool) -> str:
    if distinct_serial > 1:
        return SEED_NOT_HONOURED
    return LOAD_DEPENDENT if load_varies else DETERMINISTIC


def advice(classification: str, engine: str | None, temperature: float, fingerprints: int) -> list[str]:
    """The settings that would help, for the engine that was probed."""
    tips: list[str] = []
    if classification == SEED_NOT_HONOURED:
        if temperature == 0:
            tips.append(
                "replies differ at temperature 0, one request at a time: the server reuses state between "
                "requests (a prompt cache, a shared RNG) or samples despite temperature 0"
            )
        tips.append(_SEED.get(engine or "", _GENERIC_SEED))
    elif classification == LOAD_DEPENDENT:
        tips.append(_LOAD.get(engine or "", _GENERIC_LOAD))
    if fingerprints > 1:
        tips.append(
            "several system_fingerprints: the backend changed between calls; pin the deployment / model revision"
        )
    return tips
