"""Replacement kinds as the command line names them (``affine``, ``lowrank:K``, ``lowrank:P%``, ``mean``, ``zero``,
``remove``, ``first-apart:mean``, ``first-apart:own``, ``gated:RULE:SHARE``): what each kind is, read and checked;
the maps themselves are :mod:`linrec.core.replacements`.

Its own module, free of torch, so that ``linrec replace`` refuses a kind it cannot read before torch loads (a second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from linrec.errors import LinrecError

FROM_MOMENTS = ("affine", "lowrank", "mean", "zero", "remove")
"""Replacements :func:`linrec.core.replacements.fit_replacements` builds from moments alone (a poly needs rows: see
probes)."""

FIRST_APART = "first-apart"
"""The kind that treats the first position apart (:class:`linrec.core.replacements.FirstApartFFN`), built from the
moments of the first and the later positions apart (:func:`linrec.core.replacements.first_apart_replacements`)."""

AT_FIRST = ("mean", "own")
"""What a ``first-apart`` kind puts at the first position: that position's mean output, or the block's own."""

GATED = "gated"
"""The kind that routes each row to the affine map or to the block's own FFN by a gate's score
(:class:`linrec.core.gated.GatedFFN`), fitted on the routed rows (:mod:`linrec.core.routed`)."""

GATE_RULES = ("norm", "logistic")
"""The gates of a ``gated:RULE:SHARE`` kind (:mod:`linrec.core.gated`); ``gated:first`` is ``first-apart:own``."""


def _share(text: str) -> float:
    """A share of rows written as a fraction (0.9) or a percentage (90%), or NaN."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return math.nan


@dataclass(frozen=True)
class Kind:
    """A replacement kind as the command line names it: ``affine``, ``lowrank:K``, ``lowrank:P%`` (the rank chosen
    from a budget: the largest whose map stores at most P % of the FFN's numbers, :meth:`within`), ``mean`` or
    ``zero``."""

    name: str
    rank: int | None = None
    share: float | None = None  # lowrank:P%: P / 100, until :meth:`within` turns it into a rank
    first: str | None = None  # first-apart:F: what goes at the first position (AT_FIRST)
    rule: str | None = None  # gated:RULE:SHARE: the gate (GATE_RULES)
    routed: float | None = None  # gated:RULE:SHARE: the share of the fit rows the gate sends to the map

    @classmethod
    def parse(cls, text: str) -> Kind:
        """The kind ``text`` names, or a LinrecError saying which kinds there are."""
        name, _, rank = text.partition(":")
        if name == GATED:
            return cls._gated(text, rank)
        takes = name in ("lowrank", FIRST_APART)
        if (
            name not in (*FROM_MOMENTS, FIRST_APART)
            or takes != bool(rank)
            or (name == FIRST_APART and rank not in AT_FIRST)
        ):
            raise LinrecError(
                f"unknown replacement kind '{text}'; choose one of affine, lowrank:K (K the rank, an integer "
                "from 1 to the block's width - 1), lowrank:P% (the largest rank storing at most P % of the FFN's "
                "numbers), mean, zero, first-apart:mean or first-apart:own (the affine map of the later positions, "
                "and at each sequence's first position its mean output or the block's own), gated:RULE:SHARE (a "
                "gate, norm or logistic, sends a SHARE of the rows, e.g. 0.9 or 90%, to the affine map and the rest "
                "to the block's own FFN), or remove (the whole block, attention and FFN)"
            )
        if name == FIRST_APART:
            return cls(name, first=rank)
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

    @classmethod
    def _gated(cls, text: str, rest: str) -> Kind:
        """``gated:RULE:SHARE``, or ``gated:first`` (the first position to the FFN: ``first-apart:own``)."""
        if rest == "first":
            return cls(FIRST_APART, first="own")
        rule, _, share = rest.partition(":")
        if rule not in GATE_RULES or not share:
            raise LinrecError(
                f"'{text}' names no gate: write gated:RULE:SHARE with RULE one of {', '.join(GATE_RULES)} and SHARE "
                "the share of rows sent to the affine map (e.g. gated:norm:0.9 or gated:logistic:90%), or gated:first"
            )
        routed = _share(share)
        if not 0 <= routed <= 1:  # (NaN fails too)
            raise LinrecError(f"the share of '{text}' must be a fraction from 0 to 1 or a percentage from 0% to 100%")
        return cls(GATED, rule=rule, routed=routed)

    def __str__(self) -> str:
        if self.rule is not None:
            short = f"{self.routed:g}"
            return f"{self.name}:{self.rule}:{short if float(short) == self.routed else repr(self.routed)}"
        if self.first is not None:
            return f"{self.name}:{self.first}"
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
