"""Make a random-weight mixture-of-experts model and a tokenizer offline, for a real GPU server.

No weights can be downloaded on the GPU machine, so the model is built from a config: a
Qwen3-MoE of realistic shape (64 experts, 4 active, 16 layers: about 1.7 B parameters in bf16,
about 0.2 B active per token), so that batching, the KV cache and GPU memory matter as they do
for GLM-5. The tokenizer is a WordLevel vocabulary split on whitespace: the words the tuner's client builds
its text prompts from (``tuner.loadgen.ids_to_words``), then ``w<i>`` words to 32,000. A prompt of
N words is N tokens, so the client's random text prompts have the length it asks, and two random
prompts are two different token sequences (with unknown words every prompt would be the same run
of ``<unk>`` tokens, which the server's prefix sharing would serve from its cache).

Random weights could end a reply at the end-of-sequence token. The row of the output layer for
that token is set to zero, so its logit is 0 while the largest of 31,999 random logits is far
above it: a greedy reply (temperature 0, what the tuner asks) never stops early. The client still
checks every reply's length.

Usage: python bench/gpu/make_model.py OUT_DIR [--layers 16] [--experts 64]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

VOCAB = 32000
EOS, PAD, UNK = 1, 0, 2


def make_tokenizer(out: Path) -> None:
    """A WordLevel tokenizer of VOCAB words, saved as a fast tokenizer beside the model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from tuner.loadgen import PROMPT_TOKEN_RANGE, ids_to_words

    client_words = list(dict.fromkeys(ids_to_words(list(range(*PROMPT_TOKEN_RANGE))).split()))
    words = client_words + [f"w{i}" for i in range(3, VOCAB)]
    vocab = {"<pad>": PAD, "</s>": EOS, "<unk>": UNK}
    vocab.update({word: 3 + i for i, word in enumerate(words[: VOCAB - 3])})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    fast.chat_template = (
        "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    )
    fast.save_pretrained(out)


def make_model(out: Path, layers: int, experts: int) -> dict:
    """The random-weight Qwen3-MoE model in bf16, made on the GPU and saved to ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    cfg = Qwen3MoeConfig(
        vocab_size=VOCAB,
        hidden_size=1024,
        intermediate_size=2816,
        moe_intermediate_size=512,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=64,
        num_experts=experts,
        num_experts_per_tok=4,
        max_position_embeddings=8192,
        eos_token_id=EOS,
        pad_token_id=PAD,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    with torch.no_grad():
        model.lm_head.weight[EOS].zero_()  # greedy never picks end-of-sequence
    model.generation_config.eos_token_id = EOS
    model.generation_config.pad_token_id = PAD
    model.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    return {"parameters": params, "layers": layers, "experts": experts, "dtype": "bfloat16"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--experts", type=int, default=64)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    facts = make_model(args.out, args.layers, args.experts)
    make_tokenizer(args.out)
    facts["seconds"] = round(time.monotonic() - started, 1)
    (args.out / "made_by_tuner.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
