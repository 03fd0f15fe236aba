"""Replacement kinds: the map each kind puts where an FFN block was, fitted from the block's moments alone.

Replacements map the FFN's input hidden states (..., d) to its output (..., d). They are frozen,
like a loaded model (``requires_grad_(True)`` to fine-tune one). Each computes in its own dtype
(float32 by default, whatever the model's) and returns the input's dtype, so a bf16 model gets
bf16 back. Kinds, with the numbers each stores:

* ``affine``: the closed-form map ŷ = x W + b; stores d_in·d_out + d_out numbers.
* ``lowrank:K``: a rank-K truncation ŷ = (x D) E + b (D: d_in×K, E: K×d_out); K·(d_in + d_out) + d_out.
  ``lowrank:P%`` chooses K from a budget: the largest rank storing at most P % of the FFN's numbers.
* ``mean``: the block's mean output on the training rows (mean ablation); d_out (the stored mean).
* ``zero``: nothing, the FFN removed; 0.
* ``remove``: the whole block removed, attention and FFN, as depth pruning does (:class:`RemovedBlock`, which
  surgery turns into a model of fewer decoder layers: :mod:`linrec.interventions.removal`); 0, and the block's
  attention is saved too.
* ``first-apart:mean`` and ``first-apart:own``: the first position of each sequence apart. With causal attention
  that position sees only its own token, so its rows (where the attention sink sits, often huge) are unlike every
  other; a fit on all rows is pulled towards them. This kind puts the affine map fitted on the later positions alone
  at every later position and, at each sequence's first position, one constant vector (``mean``: that position's
  mean output, exact whenever every sequence starts with the same token, as after a BOS token; d_in·d_out + 2·d_out
  numbers) or the block's own output (``own``: exact; the FFN's weights stay in use for one position per sequence,
  so the block stores its affine map on top of them). Which position is first is read from each call's attention
  mask (its first kept column) and cache (a call that continues cached sequences has none):
  :meth:`FirstApartFFN.attach`.
* ``gated:RULE:SHARE``: a gate (``norm``: the FFN input's norm; ``logistic``: a trained classifier of d_in + 1
  numbers) sends a SHARE of the rows to the affine map fitted on exactly those rows, and the rest to the block's own
  FFN, which stays in use (:class:`linrec.core.gated.GatedFFN`); d_in·d_out + d_out + 1 numbers on top of the FFN's,
  d_in + 1 more for the logistic gate. Fitting one needs the model and the fit text, not the moments alone
  (:func:`linrec.interventions.gating.gated_replacements`). ``gated:first`` is ``first-apart:own``.

The rank-K truncation is by default the best rank-K map on the training inputs (reduced-rank
regression: W projected onto the top-K eigenvectors of the prediction covariance WᵀCxxW);
``weighted=False`` truncates the SVD of W itself. Either way the bias is refitted,
b = ȳ - x̄ W_K.

A replacement's numbers are its ``state_dict()``; :func:`empty_replacement` builds a module of a kind and
shape to load them into, which is how a saved replacement directory is read back
(:mod:`linrec.interventions.replacement.directory`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from linrec.core.fit import DEFAULT_RCOND, AffineFit, fit_affine
from linrec.core.gated import GatedFFN, gate_of
from linrec.core.kinds import AT_FIRST, FIRST_APART, FROM_MOMENTS, GATED, Kind
from linrec.core.moments import Moments, PositionMoments, merge_folds
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle


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


class RemovedBlock(nn.Module):
    """The whole block removed, attention and FFN: a marker that stores nothing. Surgery
    (:func:`linrec.interventions.surgery.swapped`, ``install``) takes the block's decoder layer out of the model
    instead of putting this where its FFN is (:mod:`linrec.interventions.removal`), so it never runs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise LinrecError(
            "a removed block has no FFN to run: put it in a model (linrec.swapped, linrec.install), which takes the "
            "block's decoder layer out"
        )


class FirstApartFFN(nn.Module):
    """ŷ = x W + b, the map of the later positions, but at each sequence's first position: the stored ``mean`` (of
    that position's outputs), or, with ``mean`` None, the block's own FFN, given at placement (:meth:`attach`; it
    stays the base model's, out of this module's ``state_dict``).

    Which column of a call is a sequence's first is set before each forward of the model by the hook
    :meth:`attach` registers: the first kept column of each row of the attention mask (column 0 without a mask),
    none in a call that continues cached sequences (a step of ``generate()``). Used alone, unattached, column 0 of
    every call is first."""

    mean: torch.Tensor | None

    def __init__(self, later: AffineFFN, mean: torch.Tensor | None, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.later = later
        self.register_buffer("mean", None if mean is None else mean.detach().to(dtype).clone())
        self.starts: torch.Tensor | None = torch.zeros(1, dtype=torch.long)  # per row, its first column (one: all)
        self.__dict__["own"] = None  # the block's FFN (kind own), unregistered: its weights stay the base model's

    @property
    def borrowed(self) -> nn.Module | None:
        """The base model's FFN this replacement runs at the first position (kind ``own``), or None."""
        return self.__dict__["own"]

    def attach(self, model: nn.Module, original: nn.Module) -> RemovableHandle:
        """Put in place in ``model`` instead of ``original`` (its FFN): keep ``original`` for the first position
        (kind ``own``) and watch each forward's attention mask and cache for where sequences start; the handle
        stops watching."""
        if self.mean is None:
            self.__dict__["own"] = original

        def watch(_model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            cache = kwargs.get("past_key_values")
            if cache is not None and hasattr(cache, "get_seq_length") and cache.get_seq_length() > 0:
                self.starts = None
                return
            mask = kwargs.get("attention_mask")
            if isinstance(mask, torch.Tensor) and mask.dim() == 2:
                self.starts = mask.to(torch.int8).argmax(1)  # the first kept column of each row
            else:
                self.starts = torch.zeros(1, dtype=torch.long)

        return model.register_forward_pre_hook(watch, with_kwargs=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.later(x)
        if self.starts is None:
            return y
        rows = torch.arange(x.shape[0], device=x.device)
        starts = self.starts.to(x.device).expand(x.shape[0])
        if self.mean is not None:
            first = self.mean.to(y.dtype).expand(x.shape[0], -1)
        elif self.borrowed is not None:
            first = self.borrowed(x[rows, starts][:, None])[:, 0].to(y.dtype)
        else:
            raise LinrecError(
                "a first-apart:own replacement runs the block's own FFN at the first position: put it in a model "
                "(linrec.swapped, linrec.install), which hands it that FFN"
            )
        return y.index_put((rows, starts), first)


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
        elif kind == "remove":
            out[b] = RemovedBlock()
        else:
            out[b] = ZeroFFN()
    return out


def first_apart_replacements(
    positions: PositionMoments, at_first: str, blocks: Sequence[int], rcond: float = DEFAULT_RCOND
) -> dict[int, nn.Module]:
    """A :class:`FirstApartFFN` per block of ``blocks``: the affine map fitted on every fold's later rows, and at the
    first position that position's mean output over every fold (``at_first`` ``mean``) or the block's own (``own``).
    A LinrecError where the first position was not kept apart, or where no row follows it."""
    if at_first not in AT_FIRST:
        raise LinrecError(f"{FIRST_APART} puts {' or '.join(AT_FIRST)} at the first position; got '{at_first}'")
    apart = [b for b in blocks if b not in positions.first]
    if apart:
        raise LinrecError(
            f"blocks {apart} were measured without their first position kept apart (a store that keeps every row's "
            "moments merged, or a capture with --skip-first): capture them with Measurement.capture and no skip_first"
        )
    out: dict[int, nn.Module] = {}
    for b in blocks:
        later = merge_folds(list(positions.later[b]))
        if later.n == 0:
            raise LinrecError(
                f"block {b} has no rows after the first position of each sequence (sequences one token long): "
                f"{FIRST_APART} needs longer ones (--seq-len)"
            )
        mean = merge_folds(list(positions.first_folds(b))).mean_y if at_first == "mean" else None
        out[b] = FirstApartFFN(affine_ffn(fit_affine(later, rcond)), mean)
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
    if kind.name == FIRST_APART:
        return FirstApartFFN(AffineFFN(z(d_in, d_out), z(d_out), dtype), z(d_out) if kind.first == "mean" else None)
    if kind.name == GATED:
        assert kind.rule is not None  # Kind.parse gives every gated kind its rule
        return GatedFFN(AffineFFN(z(d_in, d_out), z(d_out), dtype), gate_of(kind.rule, d_in), 0.0)
    return RemovedBlock() if kind.name == "remove" else ZeroFFN()
