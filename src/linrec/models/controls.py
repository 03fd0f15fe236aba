"""Weights with the learned structure taken out: the controls that tell a learned property from an architectural one.

Two controls of a trained model, each seeded: ``init`` is the same architecture freshly initialised
(transformers' own initialisation for it), so nothing was learned and the weights' scales are the
initialiser's; ``permuted`` keeps every trained weight matrix but shuffles its entries, so each
matrix keeps its exact distribution of values (and so its scale) while any learned arrangement is
gone. Vectors (norm gains, biases) are left as trained. A checkpoint is named ``"<control>"`` for
the first of a profile's seeds, or ``"<control>@<seed>"`` (:func:`parse_control`).
"""

from __future__ import annotations

import torch
from torch import nn

from linrec.errors import LinrecError

CONTROLS = ("init", "permuted")


def parse_control(checkpoint: str) -> tuple[str, int | None] | None:
    """(control, seed or None for the default) of a control checkpoint name; None for any other name."""
    kind, _, seed = checkpoint.partition("@")
    if kind not in CONTROLS:
        return None
    if seed and not seed.isdigit():
        raise LinrecError(f"checkpoint '{checkpoint}': the seed after '@' must be a non-negative integer")
    return kind, int(seed) if seed else None


def random_init(model: nn.Module, seed: int) -> nn.Module:
    """A fresh model of ``model``'s class and configuration, initialised with ``seed``, frozen in eval mode."""
    config = getattr(model, "config", None)
    if config is None:
        raise LinrecError("a random-init control needs a transformers model (one with a config)")
    parameter = next(model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh: nn.Module = type(model)(config)
    return fresh.to(device=parameter.device, dtype=parameter.dtype).eval().requires_grad_(False)


def permuted(model: nn.Module, seed: int) -> nn.Module:
    """``model`` with the entries of every weight matrix (every parameter of two or more dimensions) shuffled
    in place, each by its own seeded permutation; a tied matrix is shuffled once."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, weight in sorted(model.named_parameters()):
            if weight.dim() >= 2:
                order = torch.randperm(weight.numel(), generator=generator).to(weight.device)
                weight.copy_(weight.reshape(-1)[order].reshape(weight.shape))
    return model


def apply_control(model: nn.Module, control: str, seed: int) -> nn.Module:
    """``model`` turned into the control named ``control`` with ``seed`` (see the module docstring)."""
    if control == "init":
        return random_init(model, seed)
    if control == "permuted":
        return permuted(model, seed)
    raise LinrecError(f"unknown control '{control}'; choose one of {', '.join(CONTROLS)}")
