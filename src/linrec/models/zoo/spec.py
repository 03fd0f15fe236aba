"""What the zoo is: its models (:class:`ZooEntry`), the zoos of the profiles (:data:`ZOOS`) and their configs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from linrec.data.offline_corpora import OFFLINE_CORPORA
from linrec.errors import LinrecError

if TYPE_CHECKING:
    from transformers import PretrainedConfig

ZOO_FORMAT = 2
"""Bumped whenever the code changes what a given configuration trains to (it is part of every key).
2: GPT-2 entries compute their tanh GELU with the fused kernel (``gelu_pytorch_tanh``)."""

FAMILIES = ("gpt2", "gpt_neox", "llama")


@dataclass(frozen=True)
class ZooEntry:
    """One model of the zoo: architecture, seed and training schedule."""

    name: str
    family: str
    width: int
    depth: int
    heads: int
    ffn: int
    seed: int
    steps: int
    batch_size: int
    seq_len: int
    lr: float
    warmup_steps: int
    checkpoints: tuple[int, ...]  # optimiser steps at which weights are saved, 0 (init) and steps included
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise LinrecError(
                f"zoo entry '{self.name}': unknown family '{self.family}'; choose one of {', '.join(FAMILIES)}"
            )
        for attr in ("width", "depth", "heads", "ffn", "steps", "batch_size", "seq_len"):
            if getattr(self, attr) < 1:
                raise LinrecError(f"zoo entry '{self.name}': {attr} must be positive; got {getattr(self, attr)}")
        if self.width % self.heads:
            raise LinrecError(f"zoo entry '{self.name}': width {self.width} is not divisible by heads {self.heads}")
        if (
            self.checkpoints[0] != 0
            or self.checkpoints[-1] != self.steps
            or list(self.checkpoints) != sorted(set(self.checkpoints))
        ):
            raise LinrecError(
                f"zoo entry '{self.name}': checkpoints must rise strictly from 0 to steps={self.steps}; "
                f"got {self.checkpoints}"
            )

    @property
    def tokens_seen(self) -> int:
        return self.steps * self.batch_size * self.seq_len

    def checkpoint_names(self) -> list[str]:
        return [f"step{s}" for s in self.checkpoints]


@dataclass(frozen=True)
class ZooSpec:
    """A zoo: shared tokenizer and data settings, and its entries."""

    name: str
    vocab_size: int
    train_mix: tuple[tuple[str, float], ...]  # (offline corpus, share of training sequences)
    eval_corpora: tuple[str, ...]
    eval_tokens: int  # held-out tokens per corpus scored at each checkpoint
    max_chars: int | None  # fit-text characters per corpus used for the tokenizer and training (None: all)
    entries: tuple[ZooEntry, ...] = field(default=())

    def entry(self, name: str | ZooEntry) -> ZooEntry:
        if isinstance(name, ZooEntry):
            return name
        for e in self.entries:
            if e.name == name:
                return e
        raise LinrecError(f"the '{self.name}' zoo has no model '{name}'; choose one of {', '.join(self.names())}")

    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    @property
    def train_corpora(self) -> list[str]:
        return [c for c, _ in self.train_mix]


def _family_entries(
    width: int,
    depth: int,
    heads: int,
    steps: int,
    batch_size: int,
    seq_len: int,
    lr: float,
    checkpoint_fractions: tuple[float, ...],
    second_seed: str = "gpt2",
) -> tuple[ZooEntry, ...]:
    """One entry per family (seed 0) plus a seed-1 twin of ``second_seed``, all of one size and schedule."""
    checkpoints = tuple(sorted({0, steps, *(round(f * steps) for f in checkpoint_fractions)}))
    short = {"gpt2": "gpt2", "gpt_neox": "neox", "llama": "llama"}

    def entry(name: str, family: str, seed: int) -> ZooEntry:
        return ZooEntry(
            name,
            family,
            seed=seed,
            width=width,
            depth=depth,
            heads=heads,
            ffn=4 * width,
            steps=steps,
            batch_size=batch_size,
            seq_len=seq_len,
            lr=lr,
            warmup_steps=max(1, steps // 20),
            checkpoints=checkpoints,
        )

    entries = [entry(f"zoo-{short[f]}", f, seed=0) for f in FAMILIES]
    entries.append(entry(f"zoo-{short[second_seed]}-seed1", second_seed, seed=1))
    return tuple(entries)


DOMAIN_SHARES = {"prose": 0.45, "code": 0.45, "records": 0.1}
"""Share of training sequences from the offline corpus of each domain."""

OFFLINE_MIX = tuple((corpus, DOMAIN_SHARES[domain]) for corpus, domain in OFFLINE_CORPORA.items())
"""The training mix of the offline zoos: (offline corpus, share), in the order of ``OFFLINE_CORPORA``
(the order and the shares are part of every cache key)."""

# Sizing, measured on the project's 2-core machine (2026-11-23). A step of 16 x 128 tokens took
# 0.62 to 0.70 s on one core, 8 x 128 about 0.30 s: less than half, so the batch is 8.
# At 8 x 128 one model, evaluations and checkpoints included, trains in 350 to 410 s, so the four
# models on two workers take 13.4 minutes with the tokenizer and data: the cold offline book
# (zoo and chapters) built in 20.2 minutes against its 25-minute budget. The smoke zoo trains in seconds.
ZOOS: dict[str, ZooSpec] = {
    "offline": ZooSpec(
        "offline",
        vocab_size=4096,
        train_mix=OFFLINE_MIX,
        eval_corpora=tuple(OFFLINE_CORPORA),
        eval_tokens=32_768,
        max_chars=None,
        entries=_family_entries(
            width=128,
            depth=6,
            heads=4,
            steps=1000,
            batch_size=8,
            seq_len=128,
            lr=2e-3,
            checkpoint_fractions=(1 / 16, 1 / 8, 1 / 4, 1 / 2),
        ),
    ),
    "smoke": ZooSpec(
        "smoke",
        vocab_size=512,
        train_mix=OFFLINE_MIX,
        eval_corpora=tuple(OFFLINE_CORPORA),
        eval_tokens=2048,
        max_chars=300_000,
        entries=_family_entries(
            width=32,
            depth=3,
            heads=2,
            steps=200,
            batch_size=8,
            seq_len=64,
            lr=3e-3,
            checkpoint_fractions=(1 / 4, 1 / 2, 3 / 4),
        ),
    ),
}


def get_zoo(name: str) -> ZooSpec:
    """The zoo called ``name`` (that of the profile of the same name)."""
    if name not in ZOOS:
        raise LinrecError(
            f"no zoo named '{name}'; zoos exist for the profiles {', '.join(ZOOS)} (the other profiles load hub models)"
        )
    return ZOOS[name]


class _Vocabulary(TypedDict):
    """The keyword arguments of every family's config that the tokenizer decides."""

    bos_token_id: int
    eos_token_id: int
    pad_token_id: int
    vocab_size: int


def model_config(entry: ZooEntry, vocab_size: int, eos_id: int) -> PretrainedConfig:
    """The transformers config of a zoo entry (dropout off everywhere)."""
    from transformers import GPT2Config, GPTNeoXConfig, LlamaConfig

    ids = _Vocabulary(bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id, vocab_size=vocab_size)
    if entry.family == "gpt2":
        return GPT2Config(
            n_embd=entry.width,
            n_layer=entry.depth,
            n_head=entry.heads,
            n_inner=entry.ffn,
            n_positions=entry.seq_len,
            activation_function="gelu_pytorch_tanh",  # GPT-2's tanh GELU in one kernel
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **ids,
        )
    if entry.family == "gpt_neox":
        return GPTNeoXConfig(
            hidden_size=entry.width,
            num_hidden_layers=entry.depth,
            num_attention_heads=entry.heads,
            intermediate_size=entry.ffn,
            hidden_act="gelu",
            # transformers 5 reads it from **kwargs (4.x names it), which its dataclass signature does not show.
            rotary_pct=0.25,  # type: ignore[call-arg]
            use_parallel_residual=True,
            max_position_embeddings=entry.seq_len,
            tie_word_embeddings=False,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            **ids,
        )
    return LlamaConfig(
        hidden_size=entry.width,
        num_hidden_layers=entry.depth,
        num_attention_heads=entry.heads,
        num_key_value_heads=entry.heads,
        intermediate_size=entry.ffn,
        hidden_act="silu",
        max_position_embeddings=entry.seq_len,
        tie_word_embeddings=False,
        attention_dropout=0.0,
        **ids,
    )
