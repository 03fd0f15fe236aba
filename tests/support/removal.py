"""Tiny models of four layers, so blocks can be removed from the middle, and replacement directories made of them
(the fixture ``made``)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

import linrec
from conftest import tiny_config
from linrec.interventions.replacement.replace import replace


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


@pytest.fixture(scope="session")
def made(tmp_path_factory, tokenizer, texts):
    """(family, kind) -> a replacement directory of blocks 2 and 1 of a four-layer model of that family."""
    root = tmp_path_factory.mktemp("export")
    done = {}

    def make(family: str, kind: str):
        if (family, kind) not in done:
            done[family, kind] = _make(family, kind)
        return done[family, kind]

    def _make(family: str, kind: str):
        base = root / f"{family}-base"
        if not base.exists():
            four_layers(family).save_pretrained(base)
            tokenizer.save_pretrained(base)
        model, _ = linrec.load_model(str(base))
        result = replace(model, *texts, kind=kind, blocks=[2, 1], folds=4, progress=False, name=str(base))
        return result.save(root / f"{family}-{kind.replace(':', '')}")

    return make
