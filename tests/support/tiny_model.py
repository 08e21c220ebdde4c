"""Build a tiny random-weight Llama and its tokenizer offline, for a real vLLM server on the CPU.

Nothing is downloaded: the weights are drawn from a fixed seed and the tokenizer is a byte-level
BPE trained on text this script writes itself. The same seed gives byte-identical files.

Run it with the vLLM venv's Python (it needs torch, transformers and tokenizers)::

    /opt/tuner-venvs/vllm/bin/python tests/support/tiny_model.py /tmp/tiny-llama

A second run into the same directory with the same settings does nothing (``tiny-model.json``
records them); ``--force`` rebuilds. Tests started from the project's own Python call
:func:`build_command` and run it as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

__all__ = ["VLLM_PYTHON", "STAMP_NAME", "build_command", "build_tiny_model", "main"]

# The venv that .ci/install_vllm.sh creates.
VLLM_PYTHON = "/opt/tuner-venvs/vllm/bin/python"
# The file, beside the model, that records how it was built.
STAMP_NAME = "tiny-model.json"

_WORDS = (
    "the a an of to in on for with from by at as is was are be been has have had do does did "
    "server model token tokens batch prefill decode cache block request requests latency "
    "throughput queue schedule launch flag config trial study search space sample prune "
    "engine kernel memory page prefix chunk sequence length output input stream answer "
    "fast slow small large first last next best worst stable broken ready health metric "
    "one two three four five six seven eight nine ten hundred thousand zero"
).split()


def build_command(outdir: str | os.PathLike[str], python: str = VLLM_PYTHON) -> list[str]:
    """The argv that builds the tiny model into ``outdir`` with the vLLM venv's Python."""
    return [python, str(Path(__file__).resolve()), str(outdir)]


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    """``count`` made-up words of 1-4 syllables, so the BPE has enough pairs to merge."""
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    return ["".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(1, 4)))
            for _ in range(count)]


def _training_text(seed: int, lines: int) -> list[str]:
    """Deterministic English-like lines, with digits and punctuation, to train the tokenizer."""
    rng = random.Random(seed)
    vocabulary = list(_WORDS) + _pseudo_words(rng, 600)
    text = []
    for _ in range(lines):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(4, 14))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 4096)))
        sentence = " ".join(words)
        text.append(sentence[0].upper() + sentence[1:] + rng.choice(".,;:?!"))
    return text


def _ascii_alphabet() -> list[str]:
    """The byte-level symbols of printable ASCII, space, tab and newline.

    Every token is then whole ASCII text: a random model's output always decodes to visible
    text. With all 256 bytes, a stream of lone UTF-8 continuation bytes decodes to nothing.
    """
    return [chr(byte) for byte in range(0x21, 0x7F)] + ["\u0120", "\u0109", "\u010a"]


def _build_tokenizer(seed: int, vocab_size: int):  # -> PreTrainedTokenizerFast
    """A byte-level BPE of ``vocab_size`` tokens, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=_ascii_alphabet(),
        limit_alphabet=len(_ascii_alphabet()),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_training_text(seed, lines=4000), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=2048,
    )


def _name_tokenizer_class(config_path: Path) -> None:
    """Name the tokenizer class that transformers 4 and 5 both load.

    transformers 5 writes ``TokenizersBackend``, which transformers 4 (in other venvs, e.g.
    sglang's benchmark) does not know; ``PreTrainedTokenizerFast`` is the same class in 5.
    """
    tokenizer_config = json.loads(config_path.read_text())
    tokenizer_config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n")


def build_tiny_model(
    outdir: str | os.PathLike[str],
    *,
    seed: int = 0,
    vocab_size: int = 512,
    max_positions: int = 2048,
    force: bool = False,
) -> Path:
    """Write a random-weight 2-layer Llama (hidden 128, 4 heads of 32) and its tokenizer.

    Args:
        outdir: directory to write ``config.json``, ``model.safetensors`` and the tokenizer to.
        seed: seeds the weights and the tokenizer's training text.
        vocab_size: size of the BPE vocabulary, and so of the model's embedding.
        max_positions: ``max_position_embeddings``: vLLM's default ``--max-model-len``.
        force: rebuild even when ``outdir`` already holds a build with these settings.

    Returns:
        The output directory.
    """
    out = Path(outdir)
    settings = {"seed": seed, "vocab_size": vocab_size, "max_positions": max_positions}
    stamp = out / STAMP_NAME
    if not force and stamp.is_file() and json.loads(stamp.read_text()) == settings:
        return out

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the BPE trainer's counting is parallel
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer(seed, vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,  # head_dim 32: CPU attention needs 32, 64, 80, 96, 112, 128...
        num_key_value_heads=4,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",  # what vLLM on the CPU runs; float32 would be downcast
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    _name_tokenizer_class(out / "tokenizer_config.json")
    stamp.write_text(json.dumps(settings, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: ``tiny_model.py OUTDIR [--seed N] [--vocab-size N] [--force]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", help="directory to write the model and tokenizer to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--max-positions", type=int, default=2048)
    parser.add_argument("--force", action="store_true", help="rebuild an existing build")
    args = parser.parse_args(argv)
    out = build_tiny_model(
        args.outdir,
        seed=args.seed,
        vocab_size=args.vocab_size,
        max_positions=args.max_positions,
        force=args.force,
    )
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
