"""Block surgery: put a fitted map where an FFN was, for a scope or for good, and count what it stores.

The replacements themselves, and the numbers each kind stores, are :mod:`linrec.core.replacements`
(``affine``, ``lowrank:K``, ``mean``, ``zero``, ``first-apart:…``; ``remove``, a
:class:`~linrec.core.replacements.RemovedBlock`, takes the block's whole decoder layer out instead:
:mod:`linrec.interventions.removal`); a fitted :class:`linrec.interventions.probes.PolyProbe`
(seeded-poly) swaps in the same way and stores its parameters and buffers, d_in·d_out + d_out (linear)
+ r·(2·d_in + d_out) (U, V, P) + 1 or d_out (gate) + 2·d_in + d_out + 1 (the standardisation: input mean
and std, output mean and scale).

"Numbers stored" (:func:`n_stored`) is parameters plus buffers, for the original FFN too, so a
GPT-2-shaped FFN (d=768, 3072 hidden: 4,722,432 numbers) against its affine map (590,592)
gives a ratio of 7.996, the paper's "8x".

:func:`swapped` is a context manager: it sets the replacements on the FFNs' parent modules and,
on exit (also after an exception), puts the very same original module objects back, so the
model is restored bitwise. :func:`install` sets them for good (the model then holds no copy of the
originals). Either way ``save_pretrained`` raises while FFN replacements are in place (a model with whole
blocks removed and nothing else is a plain model of fewer layers, and saves as one): transformers would
write a checkpoint that reloads with the replaced FFNs randomly initialised (a load report, no error, is all
it says), so a replaced model is saved as a replacement directory instead
(:mod:`linrec.interventions.replacement.directory`). Surgery needs an FFN that is one module (input == output module in
its :class:`~linrec.models.arch.BlockSpec`: GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, Gemma 3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import pandas as pd
from torch import nn

from linrec.core.capture import device_of
from linrec.core.replacements import RemovedBlock
from linrec.errors import LinrecError
from linrec.interventions.removal import layer_list, remove, removed
from linrec.models.arch import Spec, ffn_blocks, select_blocks

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle


def ffn_site(model: nn.Module, block: int, spec: Spec = None) -> tuple[nn.Module, str, nn.Module]:
    """(parent module, attribute name, FFN module) of FFN block ``block``."""
    (b,) = select_blocks(ffn_blocks(model, spec), [block])
    if b.input != b.output:
        raise LinrecError(
            f"block {block}'s FFN spans two modules ('{b.input}' in, '{b.output}' out); surgery and cross-feeding "
            "need an FFN that is one module mapping hidden states to hidden states (gpt2, gpt_neox, llama, mistral, "
            "qwen2, gemma3_text), or a spec naming such a module as both input and output"
        )
    parent_name, _, attr = b.input.rpartition(".")
    parent = model.get_submodule(parent_name)
    return parent, attr, getattr(parent, attr)


def n_stored(module: nn.Module) -> int:
    """Numbers a module stores: its parameters plus its buffers, plus those of a base model's module it runs (the FFN a
    ``first-apart:own`` replacement keeps in use: :attr:`linrec.core.replacements.FirstApartFFN.borrowed`)."""
    own = sum(t.numel() for t in module.parameters()) + sum(t.numel() for t in module.buffers())
    borrowed = getattr(module, "borrowed", None)
    return own + (n_stored(borrowed) if isinstance(borrowed, nn.Module) else 0)


def stands_for(model: nn.Module, block: int, replacement: nn.Module, spec: Spec = None) -> nn.Module:
    """What ``replacement`` takes the place of in ``model``: block ``block``'s whole decoder layer for a
    :class:`~linrec.core.replacements.RemovedBlock`, its FFN otherwise."""
    if isinstance(replacement, RemovedBlock):
        return layer_list(model)[2][block]
    return ffn_site(model, block, spec)[2]


def _split(replacements: Mapping[int, nn.Module]) -> tuple[dict[int, nn.Module], list[int]]:
    """(the FFN replacements, the blocks removed whole)."""
    gone = [b for b, r in replacements.items() if isinstance(r, RemovedBlock)]
    return {b: r for b, r in replacements.items() if b not in gone}, gone


def param_table(model: nn.Module, replacements: Mapping[int, nn.Module], spec: Spec = None) -> pd.DataFrame:
    """Per block: the replacement's class, numbers stored, the original FFN's (the whole layer's for a removed
    block: :func:`stands_for`), their ratio and the saving.

    ``ratio`` is original / replacement (8.0 means eight times fewer numbers; inf for removal).
    """
    rows = []
    for b in sorted(replacements):
        original = n_stored(stands_for(model, b, replacements[b], spec))
        params = n_stored(replacements[b])
        rows.append(
            {
                "block": b,
                "replacement": type(replacements[b]).__name__,
                "params": params,
                "original_params": original,
                "ratio": original / params if params else float("inf"),
                "saved": original - params,
            }
        )
    return pd.DataFrame(rows, columns=["block", "replacement", "params", "original_params", "ratio", "saved"])


class RefuseSaving:
    """What ``save_pretrained`` of a model with replacements in place is: a LinrecError saying what to do instead."""

    def __init__(self, blocks: Iterable[int]) -> None:
        self.blocks = sorted(set(blocks))

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise LinrecError(
            f"FFN blocks {', '.join(map(str, self.blocks))} of this model are replaced by linrec, and save_pretrained "
            "would write a checkpoint that reloads with those FFNs randomly initialised. Save a replacement directory "
            "instead (linrec replace --out DIR, or linrec.interventions.replacement.directory.save_replaced): the base "
            "model's name and hash, replacements.safetensors and linrec-replacement.json, which "
            "linrec.load_replaced(DIR) loads exactly"
        )


def _refuse_saving(model: nn.Module, blocks: Iterable[int]) -> Callable[..., None] | None:
    """Make ``model.save_pretrained`` refuse (:class:`RefuseSaving`) for ``blocks`` and any already refused;
    return what was there before (None: the class's own method)."""
    previous = model.__dict__.get("save_pretrained")
    already = previous.blocks if isinstance(previous, RefuseSaving) else []
    model.__dict__["save_pretrained"] = RefuseSaving([*already, *blocks])  # an instance attribute hides the method
    return previous


Placed = tuple[nn.Module, str, nn.Module, "RemovableHandle | None"]
"""Where a replacement went: (parent, attribute, the original FFN, the handle of what it watches in the model)."""


def _place(model: nn.Module, replacements: Mapping[int, nn.Module], spec: Spec) -> list[Placed]:
    """Set each replacement where its block's FFN is (moved to that FFN's device), every block checked before any is
    changed; a replacement with an ``attach(model, original)`` method (:class:`linrec.core.replacements.FirstApartFFN`)
    is attached. Where each went (:data:`Placed`)."""
    sites = {b: ffn_site(model, b, spec) for b in replacements}
    done: list[Placed] = []
    for b, new in replacements.items():
        parent, attr, original = sites[b]
        device = device_of(original)
        setattr(parent, attr, new.to(device) if device is not None else new)
        attach = getattr(new, "attach", None)
        done.append((parent, attr, original, attach(model, original) if callable(attach) else None))
    return done


@contextmanager
def swapped(model: nn.Module, replacements: Mapping[int, nn.Module], spec: Spec = None) -> Iterator[nn.Module]:
    """Within the block, ``model`` runs with the FFN of each block ``b`` replaced by ``replacements[b]``.

    Replacements move to their FFN's device; blocks whose replacement is a
    :class:`~linrec.core.replacements.RemovedBlock` leave the model whole
    (:func:`linrec.interventions.removal.removed`).
    On exit the original modules (the same objects) are put back, even if the body raised; ``save_pretrained``
    refuses meanwhile where an FFN is replaced (module docstring).
    """
    ffns, gone = _split(replacements)
    done: list[Placed] = []
    previous = _refuse_saving(model, list(ffns)) if ffns else None
    try:
        for b, new in ffns.items():  # one at a time, so that a failure restores what was placed
            done += _place(model, {b: new}, spec)
        with removed(model, gone) if gone else nullcontext():
            yield model
    finally:
        for parent, attr, original, watching in reversed(done):
            setattr(parent, attr, original)
            if watching is not None:
                watching.remove()
        if ffns and previous is None:
            del model.__dict__["save_pretrained"]
        elif ffns:
            model.__dict__["save_pretrained"] = previous


def install(model: nn.Module, replacements: Mapping[int, nn.Module], spec: Spec = None) -> nn.Module:
    """Replace the FFN of each block ``b`` by ``replacements[b]`` for good (the originals are dropped), or remove the
    whole block where that is a :class:`~linrec.core.replacements.RemovedBlock`, and make ``save_pretrained`` refuse
    where an FFN is replaced (module docstring); ``model`` is returned."""
    ffns, gone = _split(replacements)
    if gone:
        layer_list(model)  # (refused before any FFN is changed where the layers cannot be found)
    _place(model, ffns, spec)
    if ffns:
        _refuse_saving(model, list(ffns))
    return remove(model, gone) if gone else model
