"""The emulated GLM-5 host's model, laid out where ``tuner init --emulate`` reads it.

The emulator serves one model, GLM-5-NVFP4, at ``/models/GLM-5-NVFP4`` of its host; an absolute
model path is read under the emulated host's folder. Its ``config.json`` holds the figures the
emulator assumes (tuner/emulator/README.md: 64 attention heads, MoE with an MTP head, DSA/MLA
attention) and its index the checkpoint's size (405 GB, calibration.md), so ``init`` writes for
the emulated host what it writes for a real one. Not GLM-5's published file: only the fields
``init`` reads.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["EMULATED_MODEL", "lay_out_model"]

EMULATED_MODEL = "/models/GLM-5-NVFP4"
_CONFIG = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "num_hidden_layers": 78,
    "num_attention_heads": 64,  # the emulator's assumption (attention TP must divide it)
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "kv_lora_rank": 512,  # latent attention: DP attention applies
    "num_nextn_predict_layers": 1,  # the MTP layer NEXTN speculation drafts with
    "max_position_embeddings": 202752,
}
_WEIGHTS_BYTES = 405 * 2**30  # the fit rule's 405 GB


def lay_out_model(root: Path) -> None:
    """Write the model's ``config.json`` and weight index under the emulated host's ``root``."""
    folder = root / EMULATED_MODEL.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(_CONFIG, indent=2) + "\n")
    index = {"metadata": {"total_size": _WEIGHTS_BYTES}, "weight_map": {}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index) + "\n")
