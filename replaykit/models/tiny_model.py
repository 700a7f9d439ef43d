"""A tiny llama-architecture GGUF with seeded random weights: a real engine with no download.

``write_tiny_model(path, seed=0)`` writes a ~3.5 M-parameter llama model (4 layers,
width 256) whose weights are drawn from ``numpy.random.default_rng(seed)``, a
byte-level BPE tokenizer learned here from a small built-in corpus (HF
``tokenizers``), and a ChatML chat template. The same seed gives the same bytes, on
every machine; it takes about two seconds. llama.cpp (``llama-cpp-python``) serves it:

    python -m replaykit.testing.tiny_model tiny.gguf --seed 0
    python -m llama_cpp.server --model tiny.gguf --n_ctx 2048 --n_threads 1 \\
        --chat_format chatml-function-calling --port 8080

Its replies are noise, but real noise: decoded by a real engine, constrained by its
tool-call grammar, so recordings hold real tool calls. One residual channel that no
layer writes makes every position favour the token ``"``: decoded greedily its tool
calls are ``{"command": ""}`` (a harmless, real environment step); sampled, its text
may be any shell: run sampled actions only in a container or a throwaway folder.

Needs the ``gguf`` and ``tokenizers`` packages (``pip install 'replaykit[engine]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

#: ChatML, as Qwen and others ship it (what ``--chat_format chatml-function-calling`` speaks)
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

#: what the tokenizer learns its merges from: chat, shell and JSON, as agent traffic looks
CORPUS = """\
You are a shell agent. Solve the task with the bash tool, one command at a time.
When the task is complete, reply with the single word Done.
exit_code: 0
stdout:
stderr:
ls -la; cat README.md; grep -n error app.log | wc -l; echo done > out.txt
sha256sum release.tar.gz > release.sha256; python3 -c 'print(1)'; mkdir -p build
{"command": "ls"} {"command": "cat config.json"} {"name": "bash", "arguments": {}}
functions.bash: message: The file is ready. The answer is in the output.
Write the port number into config.ini and run the build script; move the files.
"""


@dataclass(frozen=True)
class TinyShape:
    """The model's size (defaults: ~3.5 M parameters)."""

    vocab_size: int = 512
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_ff: int = 704
    context_length: int = 4096
    #: how much every position prefers the token ``"``: at 0.4 greedy (temperature 0) tool-call
    #: arguments close at once (``{"command": ""}``: harmless actions, real environment steps);
    #: sampled at temperature 1 they are noise
    quote_bias: float = 0.4
    scale: float = 0.02  # standard deviation of the random weights


class _BpeModel(TypedDict):
    """The ``model`` section of a ``tokenizers`` BPE tokenizer's JSON (``Tokenizer.to_str``)."""

    vocab: dict[str, int]
    merges: list[str | list[str]]  # "a b", or ["a", "b"] in newer tokenizers


def learn_tokenizer(vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens by id, their gguf token types, merges) of a byte-level BPE learned from CORPUS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS.splitlines() * 4, trainer=trainer)
    model: _BpeModel = json.loads(tokenizer.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    tokens = [token for token, _ in by_id]
    types = [3 if token in SPECIAL_TOKENS else 1 for token in tokens]  # 3: control, 1: normal
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


def write_tiny_model(path: str | Path, seed: int = 0, shape: TinyShape | None = None) -> Path:
    """Write the tiny model to ``path`` (atomically) and return it."""
    import gguf
    import numpy as np

    shape = shape or TinyShape()
    path = Path(path)
    tokens, types, merges = learn_tokenizer(shape.vocab_size)
    rng = np.random.default_rng(seed)

    def weights(*dims: int) -> Any:
        return (rng.standard_normal(dims, dtype=np.float32) * shape.scale).astype(np.float32)

    ones = np.ones(shape.n_embd, dtype=np.float32)
    n_vocab = len(tokens)
    # dimension 0 of the residual stream is a constant channel no layer writes to; the output
    # row of ``"`` reads it, so every position leans towards closing a JSON string
    embeddings = weights(n_vocab, shape.n_embd)
    embeddings[:, 0] = 1.0
    output = weights(n_vocab, shape.n_embd)
    output[tokens.index('"'), 0] = shape.quote_bias
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp, "llama")
        _add_metadata(writer, shape, seed, tokens, types, merges)
        writer.add_tensor("token_embd.weight", embeddings)
        for i in range(shape.n_layer):
            _add_block(writer, f"blk.{i}", shape, weights, ones)
        writer.add_tensor("output_norm.weight", ones)
        writer.add_tensor("output.weight", output)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _add_metadata(
    writer: Any, shape: TinyShape, seed: int, tokens: list[str], types: list[int], merges: list[str]
) -> None:
    """The model's llama hyperparameters, its GPT-2 tokenizer and its chat template."""
    import gguf

    writer.add_name(f"replaykit-tiny-seed{seed}")
    writer.add_context_length(shape.context_length)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head)
    writer.add_rope_dimension_count(shape.n_embd // shape.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)


def _add_block(writer: Any, block: str, shape: TinyShape, weights: Callable[..., Any], ones: Any) -> None:
    """One transformer block's tensors (drawn in this order: the file is the same for a seed);
    none writes the constant channel."""
    writer.add_tensor(f"{block}.attn_norm.weight", ones)
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        matrix = weights(shape.n_embd, shape.n_embd)
        if name == "attn_output":
            matrix[0, :] = 0.0  # never writes the constant channel
        writer.add_tensor(f"{block}.{name}.weight", matrix)
    writer.add_tensor(f"{block}.ffn_norm.weight", ones)
    writer.add_tensor(f"{block}.ffn_gate.weight", weights(shape.n_ff, shape.n_embd))
    writer.add_tensor(f"{block}.ffn_up.weight", weights(shape.n_ff, shape.n_embd))
    down = weights(shape.n_embd, shape.n_ff)
    down[0, :] = 0.0  # never writes the constant channel
    writer.add_tensor(f"{block}.ffn_down.weight", down)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m replaykit.testing.tiny_model",
        description="Write a tiny random-weight llama GGUF (same bytes from the same seed).",
    )
    parser.add_argument("output", help="the .gguf file to write")
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print {path, seed, bytes} as JSON")
    args = parser.parse_args(argv)
    out = Path(args.output)
    if not out.parent.is_dir():
        print(
            f"Error: folder {out.parent} does not exist; create it or pick another output path",
            file=sys.stderr,
        )
        return 1
    try:
        written = write_tiny_model(out, seed=args.seed)
    except ImportError as exc:
        print(f"Error: {exc.name or exc} is not installed; pip install 'replaykit[engine]'", file=sys.stderr)
        return 1
    size = written.stat().st_size
    if args.json:
        print(json.dumps({"path": str(written), "seed": args.seed, "bytes": size}))
    else:
        print(f"wrote {written} ({size:,} bytes, seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
