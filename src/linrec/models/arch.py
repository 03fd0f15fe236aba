"""Where each architecture keeps its FFN blocks: an input point and an output point per layer.

X is the input of the ``input`` module (the FFN's input, after the pre-FFN norm) and Y is the
output of the ``output`` module (before dropout, any post-FFN norm and the residual add):

================================  ============================  ============================
architecture (``model_type``)     input module, layer i         output module, layer i
================================  ============================  ============================
GPT-2 (``gpt2``)                  ``h.{i}.mlp``                 same module
GPT-NeoX / Pythia (``gpt_neox``)  ``layers.{i}.mlp``            same module (parallel residual:
                                                                it reads the normed block input)
Llama, Mistral, Qwen2             ``layers.{i}.mlp``            same module (gated SiLU)
Gemma 3 (``gemma3_text``)         ``layers.{i}.mlp``            same module (gated tanh-GELU), read
                                                                before ``post_feedforward_layernorm``
BERT, RoBERTa                     ``layer.{i}.intermediate.dense``  ``layer.{i}.output.dense``
OPT (``opt``)                     ``layers.{i}.fc1``            ``layers.{i}.fc2``
================================  ============================  ============================

Gemma 3 puts an RMSNorm before and after each FFN: X is ``pre_feedforward_layernorm``'s output and Y
is the FFN's own output, before ``post_feedforward_layernorm`` rescales it, so R²_lin is the FFN's alone: the
norm after it belongs to the block no more than the residual add does. Gemma's RMSNorm multiplies by
1 + weight, not by weight (:func:`ffn_norm_gain`).

Paths are relative: they match the end of a module name, so a base model
(``GPT2Model``: ``h.0.mlp``) and a model with a head (``GPT2LMHeadModel``:
``transformer.h.0.mlp``) resolve alike. Any other model can be measured by passing
``BlockSpec`` objects (or ``[(input_name, output_name), ...]``) naming its modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from linrec.errors import LinrecError

if TYPE_CHECKING:
    from transformers import PretrainedConfig


@dataclass(frozen=True)
class BlockSpec:
    """One FFN block: X is ``input``'s input, Y is ``output``'s output (full module names)."""

    index: int
    input: str
    output: str


Spec = Sequence[BlockSpec | tuple[str, str]] | None
"""Blocks named by hand (``BlockSpec`` objects or (input, output) module-name pairs); None: from the architecture."""


_LAYOUTS: dict[str, tuple[str, str]] = {
    "gpt2": ("h.{i}.mlp", "h.{i}.mlp"),
    "gpt_neox": ("layers.{i}.mlp", "layers.{i}.mlp"),
    "llama": ("layers.{i}.mlp", "layers.{i}.mlp"),
    "mistral": ("layers.{i}.mlp", "layers.{i}.mlp"),
    "qwen2": ("layers.{i}.mlp", "layers.{i}.mlp"),
    "gemma3_text": ("layers.{i}.mlp", "layers.{i}.mlp"),
    "bert": ("layer.{i}.intermediate.dense", "layer.{i}.output.dense"),
    "roberta": ("layer.{i}.intermediate.dense", "layer.{i}.output.dense"),
    "opt": ("layers.{i}.fc1", "layers.{i}.fc2"),
}
_NORMS: dict[str, str] = {
    "gpt2": "h.{i}.ln_2",
    "gpt_neox": "layers.{i}.post_attention_layernorm",
    "llama": "layers.{i}.post_attention_layernorm",
    "mistral": "layers.{i}.post_attention_layernorm",
    "qwen2": "layers.{i}.post_attention_layernorm",
    "gemma3_text": "layers.{i}.pre_feedforward_layernorm",
    "bert": "layer.{i}.attention.output.LayerNorm",
    "roberta": "layer.{i}.attention.output.LayerNorm",
    "opt": "layers.{i}.final_layer_norm",
}
"""The norm whose output each architecture's FFN block reads (LayerNorm, or RMSNorm for the Llama family and Gemma)."""
_RESIDUAL: dict[str, tuple[str, str]] = {
    "gpt2": ("h.{i}", "h.{i}.mlp"),
    "gpt_neox": ("layers.{i}", "layers.{i}.mlp"),
    "llama": ("layers.{i}", "layers.{i}.mlp"),
    "mistral": ("layers.{i}", "layers.{i}.mlp"),
    "qwen2": ("layers.{i}", "layers.{i}.mlp"),
    "gemma3_text": ("layers.{i}", "layers.{i}.post_feedforward_layernorm"),
}
"""Where each architecture's residual stream is seen: the decoder layer holding block i (its input and output are
the stream before and after the layer) and the module whose output the layer adds to the stream for the FFN (the
FFN itself, or Gemma's norm after it). BERT and RoBERTa normalise after the add and OPT may, so their stream is not
one a block adds to."""
_UNIT_OFFSET_GAINS = ("gemma3_text",)
"""Architectures whose norms multiply by 1 + weight (Gemma's RMSNorm, whose weight starts at zero)."""
SUPPORTED = tuple(_LAYOUTS)
CAUSAL = ("gpt2", "gpt_neox", "llama", "mistral", "qwen2", "gemma3_text", "opt")

_HOW_TO = (
    "Pass your own spec instead: blocks=[(input_module_name, output_module_name), ...] in Python, "
    "one pair per FFN block, named as in model.named_modules()."
)


def _resolve(model: nn.Module, relative: str) -> str:
    names = [n for n, _ in model.named_modules() if n == relative or n.endswith("." + relative)]
    if len(names) != 1:
        raise LinrecError(f"expected one module named like '{relative}', found {names or 'none'}. {_HOW_TO}")
    return names[0]


def check_supported(model_type: str | None) -> None:
    """Raise, listing the supported ones, when ``model_type`` (a config's) has no known FFN layout."""
    if model_type not in _LAYOUTS:
        raise LinrecError(
            f"unsupported architecture '{model_type}'. Supported model types: {', '.join(SUPPORTED)}. {_HOW_TO}"
        )


def check_one_module(model_type: str | None) -> None:
    """Refuse a model type whose FFN spans two modules (BERT's, OPT's): block surgery puts one module in place of
    the FFN, so it needs one to replace. Checked from a config, before any weights load."""
    check_supported(model_type)
    assert model_type is not None  # check_supported refused None
    first, last = _LAYOUTS[model_type]
    if first != last:
        whole = ", ".join(t for t, (a, b) in _LAYOUTS.items() if a == b)
        raise LinrecError(
            f"a '{model_type}' model's FFN spans two modules ('{first}' in, '{last}' out), and replacing a block needs "
            f"an FFN that is one module; models whose FFN is one module: {whole}"
        )


def _checked_layout(model: nn.Module) -> tuple[str, PretrainedConfig]:
    """``model.config.model_type`` (refused by ``check_supported`` unless known) and ``model.config``."""
    config: PretrainedConfig | None = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    check_supported(model_type)
    assert config is not None and model_type is not None  # check_supported refused a model without either
    return model_type, config


def ffn_blocks(model: nn.Module, spec: Spec = None) -> list[BlockSpec]:
    """The FFN blocks of ``model`` in depth order, from its architecture or from ``spec``."""
    modules = dict(model.named_modules())
    if spec is not None:
        blocks = [s if isinstance(s, BlockSpec) else BlockSpec(i, s[0], s[1]) for i, s in enumerate(spec)]
        for b in blocks:
            for name in (b.input, b.output):
                if name not in modules:
                    raise LinrecError(f"block {b.index}: the model has no module named '{name}'")
        return blocks
    model_type, config = _checked_layout(model)
    src, dst = _LAYOUTS[model_type]
    n_layers = config.num_hidden_layers
    return [BlockSpec(i, _resolve(model, src.format(i=i)), _resolve(model, dst.format(i=i))) for i in range(n_layers)]


def check_blocks(wanted: Sequence[int], n_blocks: int) -> None:
    """Refuse block indices outside 0..n_blocks - 1; ``n_blocks`` may come from a config, before weights load."""
    missing = sorted({i for i in wanted if not 0 <= i < n_blocks})
    if missing:
        raise LinrecError(f"no FFN block {', '.join(map(str, missing))}; this model has blocks 0..{n_blocks - 1}")


def residual_sites(model: nn.Module, blocks: Sequence[int], spec: Spec = None) -> dict[int, tuple[str, str]]:
    """Per block, the full names of its decoder layer and of the module whose output that layer adds to its
    residual stream for the FFN (:data:`_RESIDUAL`); a LinrecError saying why where the library cannot see that
    stream: blocks named by hand (``spec``), or an architecture that normalises after the residual add."""
    if spec is not None:
        raise LinrecError(
            "blocks named by hand (a spec) say where the FFN is, not where its layer's residual stream is, so the "
            "residual-stream scores cannot be read; measure the model by its architecture (no spec)"
        )
    model_type, config = _checked_layout(model)
    if model_type not in _RESIDUAL:
        raise LinrecError(
            f"linrec cannot see the residual stream a '{model_type}' block adds to (its layers normalise after the "
            f"residual add, or may), so the residual-stream scores are not defined for it; they are for "
            f"{', '.join(_RESIDUAL)}"
        )
    check_blocks(blocks, config.num_hidden_layers)
    layer, added = _RESIDUAL[model_type]
    return {i: (_resolve(model, layer.format(i=i)), _resolve(model, added.format(i=i))) for i in blocks}


def ffn_norm(model: nn.Module, block: int) -> nn.Module:
    """The norm module whose output FFN block ``block`` of ``model`` reads (from its architecture)."""
    model_type, config = _checked_layout(model)
    check_blocks([block], config.num_hidden_layers)
    return model.get_submodule(_resolve(model, _NORMS[model_type].format(i=block)))


def ffn_norm_gain(model: nn.Module, block: int) -> torch.Tensor | None:
    """The gain by which the norm of :func:`ffn_norm` multiplies its normalised rows (detached): its ``weight``, or
    1 + weight where the architecture's norm is Gemma's; None for a norm without a weight tensor."""
    weight = getattr(ffn_norm(model, block), "weight", None)
    if not isinstance(weight, torch.Tensor):
        return None
    offset = 1.0 if _checked_layout(model)[0] in _UNIT_OFFSET_GAINS else 0.0
    return weight.detach() + offset


def select_blocks(blocks: list[BlockSpec], wanted: Sequence[int] | None) -> list[BlockSpec]:
    """The subset of ``blocks`` with the given indices (all when ``wanted`` is None)."""
    if wanted is None:
        return blocks
    by_index = {b.index: b for b in blocks}
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise LinrecError(f"no FFN block {missing}; this model has blocks 0..{len(blocks) - 1}")
    return [by_index[i] for i in sorted(set(wanted))]
