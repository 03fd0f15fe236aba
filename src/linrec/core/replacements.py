"""Replacement kinds: the map each kind puts where an FFN block was, fitted from the block's moments alone.

Replacements map the FFN's input hidden states (..., d) to its output (..., d). They are frozen,
like a loaded model (``requires_grad_(True)`` to fine-tune one). Each computes in its own dtype
(float32 by default, whatever the model's) and returns the input's dtype, so a bf16 model gets
bf16 back. Kinds, with the numbers each stores:

* ``affine``: the closed-form map ŷ = x W + b; stores d_in·d_out + d_out numbers.
* ``lowrank:K``: a rank-K truncation ŷ = (x D) E + b (D: d_in×K, E: K×d_out); K·(d_in + d_out) + d_out.
  ``lowrank:P%`` chooses K from a budget: the largest rank storing at most P % of the FFN's numbers.
* ``mean``: the block's mean output on the training rows (mean ablation); d_out (the stored mean).
* ``zero``: nothing, the block removed; 0.

The rank-K truncation is by default the best rank-K map on the training inputs (reduced-rank
regression: W projected onto the top-K eigenvectors of the prediction covariance WᵀCxxW);
``weighted=False`` truncates the SVD of W itself. Either way the bias is refitted,
b = ȳ - x̄ W_K.

A replacement's numbers are its ``state_dict()``; :func:`empty_replacement` builds a module of a kind and
shape to load them into, which is how a saved replacement directory is read back
(:mod:`linrec.interventions.replaced`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from linrec.core.fit import DEFAULT_RCOND, AffineFit, fit_affine
from linrec.core.moments import Moments, merge_folds
from linrec.errors import LinrecError

FROM_MOMENTS = ("affine", "lowrank", "mean", "zero")
"""Replacements :func:`fit_replacements` builds from moments alone (a poly needs rows: see probes)."""


@dataclass(frozen=True)
class Kind:
    """A replacement kind as the command line names it: ``affine``, ``lowrank:K``, ``lowrank:P%`` (the rank chosen
    from a budget: the largest whose map stores at most P % of the FFN's numbers, :meth:`within`), ``mean`` or
    ``zero``."""

    name: str
    rank: int | None = None
    share: float | None = None  # lowrank:P%: P / 100, until :meth:`within` turns it into a rank

    @classmethod
    def parse(cls, text: str) -> Kind:
        """The kind ``text`` names, or a LinrecError saying which kinds there are."""
        name, _, rank = text.partition(":")
        if name not in FROM_MOMENTS or (name == "lowrank") != bool(rank):
            raise LinrecError(
                f"unknown replacement kind '{text}'; choose one of affine, lowrank:K (K the rank, an integer "
                "from 1 to the block's width - 1), lowrank:P% (the largest rank storing at most P % of the FFN's "
                "numbers), mean, zero"
            )
        if name != "lowrank":
            return cls(name)
        if rank.endswith("%"):
            try:
                share = float(rank[:-1]) / 100
            except ValueError:
                share = math.nan
            if not 0 < share < 1:  # (NaN fails too)
                raise LinrecError(f"the budget P of '{text}' must be a number of percent above 0 and below 100")
            return cls(name, share=share)
        if not rank.isdigit() or int(rank) < 1:
            raise LinrecError(f"the rank K of '{text}' must be a positive integer, e.g. lowrank:64, or a budget, 10%")
        return cls(name, int(rank))

    def __str__(self) -> str:
        if self.share is not None:
            return f"{self.name}:{self.share * 100:g}%"
        return self.name if self.rank is None else f"{self.name}:{self.rank}"

    def within(self, ffn_numbers: int, d_in: int, d_out: int) -> Kind:
        """A ``lowrank:P%`` kind as ``lowrank:K`` for an FFN of ``ffn_numbers`` numbers and width ``d_in`` → ``d_out``:
        the largest K whose map, K·(d_in + d_out) + d_out numbers, stores at most P % of them (at most the width
        less one); any other kind as it is. A LinrecError when not even rank 1 fits the budget."""
        if self.share is None:
            return self
        rank = min(math.floor((self.share * ffn_numbers - d_out) / (d_in + d_out)), min(d_in, d_out) - 1)
        if rank < 1:
            smallest = (d_in + 2 * d_out) / ffn_numbers
            raise LinrecError(
                f"{self} leaves no rank: a rank-1 map stores {d_in + 2 * d_out} numbers, {smallest:.2%} of the "
                f"FFN's {ffn_numbers:,}; raise the budget or use mean or zero"
            )
        return Kind(self.name, rank)

    def check_width(self, width: int) -> Kind:
        """This kind, or a LinrecError when its rank is not below ``width`` (a map of full rank stores more
        numbers than the affine map it truncates)."""
        if self.rank is not None and self.rank >= width:
            raise LinrecError(
                f"lowrank:{self.rank} needs a rank below the block's width {width} (at rank {width} or more the "
                f"map stores more numbers than the affine one); use lowrank:K with K from 1 to {width - 1}, or affine"
            )
        return self


class AffineFFN(nn.Module):
    """ŷ = x W + b."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.weight = nn.Parameter(
            weight.detach().T.to(dtype).contiguous(), requires_grad=False
        )  # (d_out, d_in), as nn.Linear
        self.bias = nn.Parameter(bias.detach().to(dtype).clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.to(self.weight.dtype), self.weight, self.bias).to(x.dtype)


class LowRankFFN(nn.Module):
    """ŷ = (x D) E + b with D (d_in, k) and E (k, d_out)."""

    def __init__(
        self, down: torch.Tensor, up: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        self.down = nn.Parameter(down.detach().T.to(dtype).contiguous(), requires_grad=False)
        self.up = nn.Parameter(up.detach().T.to(dtype).contiguous(), requires_grad=False)
        self.bias = nn.Parameter(bias.detach().to(dtype).clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(x.to(self.down.dtype), self.down), self.up, self.bias).to(x.dtype)


class MeanFFN(nn.Module):
    """ŷ = ȳ for every token (mean ablation); the mean is a buffer."""

    mean: torch.Tensor  # registered as a buffer in __init__

    def __init__(self, mean: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.register_buffer("mean", mean.detach().to(dtype).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean.to(x.dtype).expand(*x.shape[:-1], self.mean.shape[0])


class ZeroFFN(nn.Module):
    """ŷ = 0: the block removed (its output width equals its input width, as for every FFN here)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def affine_ffn(fit: AffineFit, dtype: torch.dtype = torch.float32) -> AffineFFN:
    """The closed-form map as a module."""
    return AffineFFN(fit.weight, fit.bias, dtype)


def low_rank_ffn(
    fit: AffineFit, train: Moments, rank: int, weighted: bool = True, dtype: torch.dtype = torch.float32
) -> LowRankFFN:
    """A rank-``rank`` truncation of ``fit`` (reduced-rank regression, or plain SVD of W if not ``weighted``)."""
    d_in, d_out = fit.weight.shape
    if not 1 <= rank <= min(d_in, d_out):
        raise LinrecError(f"rank must be between 1 and {min(d_in, d_out)} for a {d_in}x{d_out} map; got {rank}")
    w = fit.weight.to(train.cxx.device)
    if weighted:
        predicted = w.T @ train.cxx @ w
        _, vec = torch.linalg.eigh((predicted + predicted.T) / 2)
        q = vec[:, -rank:]  # top-k output directions of the predictions
        down, up = w @ q, q.T
    else:
        u, s, vh = torch.linalg.svd(w, full_matrices=False)
        down, up = u[:, :rank] * s[:rank], vh[:rank]
    bias = train.mean_y - train.mean_x @ down @ up
    return LowRankFFN(down, up, bias, dtype)


def mean_ffn(train: Moments, dtype: torch.dtype = torch.float32) -> MeanFFN:
    """The mean-ablation replacement: the block's mean output on the training rows."""
    return MeanFFN(train.mean_y, dtype)


def fit_replacements(
    moments: Mapping[int, list[Moments]],
    kind: str,
    rank: int | None = None,
    blocks: Sequence[int] | None = None,
    weighted: bool = True,
    rcond: float = DEFAULT_RCOND,
) -> dict[int, nn.Module]:
    """One replacement of ``kind`` per block, fitted on all captured folds.

    Perplexity is measured on separate evaluation text, so nothing is held out here. ``rcond`` is the
    null-direction cutoff of the fit: the float32 one by default; a 16-bit capture needs
    ``rcond_for(dtype)`` to install the maps it was scored with (:meth:`linrec.Measurement.replacements` passes it).
    """
    if kind not in FROM_MOMENTS:
        raise LinrecError(
            f"unknown replacement kind '{kind}'; choose one of {', '.join(FROM_MOMENTS)} "
            f"(a poly comes from probes.seeded_poly)"
        )
    if (kind == "lowrank") != (rank is not None):
        raise LinrecError("give rank=k for kind 'lowrank', and only for it")
    chosen = sorted(moments) if blocks is None else list(blocks)
    missing = [b for b in chosen if b not in moments]
    if missing:
        raise LinrecError(f"no moments for blocks {missing}; captured blocks: {sorted(moments)}")
    out: dict[int, nn.Module] = {}
    for b in chosen:
        train = merge_folds(moments[b])
        if kind == "affine":
            out[b] = affine_ffn(fit_affine(train, rcond))
        elif kind == "lowrank":
            assert rank is not None  # checked above: kind 'lowrank' comes with a rank
            out[b] = low_rank_ffn(fit_affine(train, rcond), train, rank, weighted)
        elif kind == "mean":
            out[b] = mean_ffn(train)
        else:
            out[b] = ZeroFFN()
    return out


def empty_replacement(kind: Kind, d_in: int, d_out: int, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A module of ``kind`` and shape holding zeros: what a saved ``state_dict`` is loaded into."""
    z = lambda *shape: torch.zeros(*shape, dtype=dtype)  # noqa: E731
    if kind.name == "affine":
        return AffineFFN(z(d_in, d_out), z(d_out), dtype)
    if kind.name == "lowrank":
        assert kind.rank is not None  # Kind.parse gives every lowrank kind its rank
        return LowRankFFN(z(d_in, kind.rank), z(kind.rank, d_out), z(d_out), dtype)
    if kind.name == "mean":
        return MeanFFN(z(d_out), dtype)
    return ZeroFFN()
