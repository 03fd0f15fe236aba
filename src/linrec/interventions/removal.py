"""Whole blocks removed: a model of fewer decoder layers, as depth pruning (ShortGPT; Gromov et al.) makes.

A block's attention and FFN go together: its decoder layer leaves the model's layer list. What counts the layers is
renumbered with it, so the smaller model is an ordinary one of its class: each remaining layer's ``layer_idx`` (the
slot of the KV cache its attention writes), the config's ``num_hidden_layers`` and every per-layer list of the config
(Gemma 3's and Qwen2's ``layer_types``). ``generate()`` with a cache then works, and ``save_pretrained`` writes a
checkpoint of fewer layers that transformers reloads as it is (:mod:`linrec.interventions.replacement.export`).

:func:`removed` does it within a scope and puts the very same layers, indices and config back after; :func:`remove`
does it for good. (:func:`linrec.core.resume.passing` instead leaves each layer in place handing its input on: the
same perplexity, but a cache slot left empty, so it serves the prefix replay and chapter 11's removal costs, not a
model to keep.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from torch import nn

from linrec.core.resume import decoder_layers
from linrec.errors import LinrecError
from linrec.models.arch import check_blocks, ffn_blocks


def layer_list(model: nn.Module) -> tuple[nn.Module, str, nn.ModuleList]:
    """(parent module, attribute, the ``ModuleList`` of the model's decoder layers); a LinrecError where they cannot be
    found (:func:`linrec.core.resume.decoder_layers`: a model given by a spec, or one whose FFNs are not one per
    entry of one list)."""
    layers = decoder_layers(model, ffn_blocks(model))
    if layers:
        for name, module in model.named_modules():
            if isinstance(module, nn.ModuleList) and len(module) == len(layers) and module[0] is layers[0]:
                parent, _, attr = name.rpartition(".")
                return model.get_submodule(parent), attr, module
    raise LinrecError(
        "whole blocks can be removed only where the model's decoder layers are one list, an FFN in each (gpt2, "
        "gpt_neox, llama, mistral, qwen2, gemma3_text); replace its FFNs instead"
    )


def _config(model: nn.Module) -> Any:
    config: Any = model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def per_layer_fields(config: Any, n_layers: int) -> list[str]:
    """The config's attributes that hold one entry per layer (lists of ``n_layers`` entries, such as
    ``layer_types``): what removing layers must shorten."""
    return sorted(
        name
        for name, value in vars(config).items()
        if isinstance(value, list | tuple) and len(value) == n_layers and not name.startswith("_")
    )


def _renumber(model: nn.Module, blocks: Sequence[int]) -> Iterator[tuple[Any, str, Any]]:
    """Take ``blocks``' layers out and renumber; yield (object, attribute, value before) for each change made, in
    order, so it can be undone."""
    parent, attr, layers = layer_list(model)
    check_blocks(blocks, len(layers))
    if len(set(blocks)) == len(layers):
        raise LinrecError(f"removing every one of the model's {len(layers)} blocks leaves no model; keep at least one")
    config = _config(model)
    keep = [i for i in range(len(layers)) if i not in set(blocks)]
    for name in per_layer_fields(config, len(layers)):
        value = getattr(config, name)
        yield config, name, value
        setattr(config, name, type(value)(value[i] for i in keep))
    yield config, "num_hidden_layers", config.num_hidden_layers
    config.num_hidden_layers = len(keep)
    for new, old in enumerate(keep):
        for module in layers[old].modules():
            index = getattr(module, "layer_idx", None)
            if isinstance(index, int):
                yield module, "layer_idx", index
                setattr(module, "layer_idx", new)  # noqa: B010 (an attribute of transformers' own classes)
    yield parent, attr, layers
    setattr(parent, attr, nn.ModuleList([layers[i] for i in keep]))


def remove(model: nn.Module, blocks: Sequence[int]) -> nn.Module:
    """Remove the decoder layers of ``blocks`` (indices of the model as it is) from ``model`` for good, renumbering
    what counts them (module docstring); ``model`` is returned."""
    for _ in _renumber(model, sorted(set(blocks))):
        pass
    return model


@contextmanager
def removed(model: nn.Module, blocks: Sequence[int]) -> Iterator[nn.Module]:
    """Within the block, ``model`` runs without the decoder layers of ``blocks``; on exit (also after an exception)
    the same layers, indices and config values are put back."""
    changes: list[tuple[Any, str, Any]] = []
    try:
        for change in _renumber(model, sorted(set(blocks))):
            changes.append(change)
        yield model
    finally:
        for owner, name, value in reversed(changes):
            setattr(owner, name, value)
