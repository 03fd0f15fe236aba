"""Tiny models of four layers, so blocks can be removed from the middle."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

from conftest import tiny_config


def four_layers(family: str) -> torch.nn.Module:
    """A tiny random model of ``family`` with four layers (Gemma 3's alternating local and global)."""
    config = tiny_config(family)
    config.num_hidden_layers = 4
    if getattr(config, "layer_types", None) is not None:  # (Qwen2: full attention throughout, no sliding window)
        config.layer_types = [
            "sliding_attention" if family == "gemma3_text" else "full_attention",
            "full_attention",
        ] * 2
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)
