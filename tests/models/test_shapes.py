"""linrec.models.shapes: Real-shaped models: each paper model's real configuration with random weights, and a tokenizer
of its real size."""

from __future__ import annotations

import json
import math

import pytest
import torch

import linrec
from conftest import local_text
from linrec.core.capture import capture_moments, rows_needed
from linrec.core.replacements import fit_replacements
from linrec.data.corpora import load_corpus
from linrec.data.tokens import bos_id, bos_policy, make_batches
from linrec.errors import LinrecError
from linrec.experiment.profiles import PROFILES
from linrec.interventions.perplexity import swap_deltas
from linrec.models.arch import ffn_blocks
from linrec.models.loading import load_tokenizer
from linrec.models.shapes import (
    SHAPES,
    build_shaped,
    load_shaped,
    save_shaped,
    shaped_seed,
    shaped_tokenizer_dir,
)
from linrec.models.tokenizers import train_gpt2_tokenizer, train_llama_tokenizer, train_neox_tokenizer
from support.shapes import GPT2, LLAMA, PYTHIA

# (embedding rows, tokens in the tokenizer, BOS id put at the start of every window)
EXPECTED = {GPT2: (50257, 50257, None), PYTHIA: (50304, 50254, None), LLAMA: (32000, 32000, 1)}


SEQ_LEN, FOLDS = 64, 3


@pytest.fixture(scope="module")
def loaded() -> dict[str, tuple]:
    return {name: load_shaped(name, device="cpu") for name in PROFILES["paper"].models}  # not the 12B


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("stdlib-prose")


@pytest.mark.parametrize(("name", "parameters"), [
    ("70m", 70_426_624), ("160m", 162_322_944), ("410m", 405_334_016), ("1b", 1_011_781_632),
    ("1.4b", 1_414_647_808), ("2.8b", 2_775_208_960), ("6.9b", 6_857_302_016), ("12b", 11_846_072_320),
])  # fmt: skip
def test_each_pythia_shape_has_the_published_parameter_count(name, parameters):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = SHAPES[f"EleutherAI/pythia-{name}"].config
    with torch.device("meta"):  # shapes only, no memory
        model = GPTNeoXForCausalLM(GPTNeoXConfig(**{k: v for k, v in config.items() if k != "model_type"}))
    assert sum(p.numel() for p in model.parameters()) == parameters


@pytest.mark.slow
def test_the_paper_models_have_their_real_shapes(loaded):
    for name, (model, tokenizer) in loaded.items():
        rows, size, _ = EXPECTED[name]
        assert [b.index for b in ffn_blocks(model)] == list(range(12)), name
        assert model.config.hidden_size == 768, name
        assert model.get_input_embeddings().weight.shape == (rows, 768), name
        assert model.get_output_embeddings().weight.shape == (rows, 768), name
        assert len(tokenizer) == size, name
        assert json.loads((shaped_tokenizer_dir(name) / "shapes.json").read_text())["placeholders"] == 0
        assert not model.training and not any(p.requires_grad for p in model.parameters())
    gpt2, pythia, llama = (loaded[n][0] for n in (GPT2, PYTHIA, LLAMA))
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight  # tied, as GPT-2's; the others untied
    assert pythia.config.rope_parameters["partial_rotary_factor"] == 0.25 and pythia.config.use_parallel_residual
    assert llama.model.layers[0].mlp.gate_proj.out_features == 3072 and llama.config.rms_norm_eps == 1e-6
    assert loaded[LLAMA][1].eos_token_id == 2 and loaded[PYTHIA][1].eos_token_id == 0
    assert loaded[GPT2][1].eos_token_id == 50256 == gpt2.config.eos_token_id
    assert loaded[LLAMA][1].convert_ids_to_tokens([0, 1, 2, 3]) == ["<unk>", "<s>", "</s>", "<0x00>"]
    assert loaded[PYTHIA][1].convert_ids_to_tokens([0, 1]) == ["<|endoftext|>", "<|padding|>"]


@pytest.mark.slow
def test_measure_and_a_swap_at_full_size(loaded, corpus):
    rows = rows_needed(768, FOLDS, SEQ_LEN)  # the fewest rows that leave every training split width + 1 rows
    for name, (model, tokenizer) in loaded.items():
        fit = make_batches(tokenizer, corpus.fit_text, seq_len=SEQ_LEN, max_rows=rows, batch_size=8)
        table = linrec.measure(model, fit, blocks=[0, 11], folds=FOLDS, progress=False)  # first and last of 12
        assert list(table.block) == [0, 11] and set(table.d_in) == set(table.d_out) == {768}, name
        assert all(math.isfinite(r) and r <= 1 for r in table.r2_lin), name
        moments = capture_moments(model, fit, blocks=[5], folds=FOLDS, progress=False)
        held = make_batches(tokenizer, corpus.eval_text, seq_len=SEQ_LEN, max_rows=2 * SEQ_LEN)
        swap = swap_deltas(model, held, fit_replacements(moments, "affine"), progress=False)
        assert math.isfinite(swap.delta_ppl[0]) and swap.delta_ppl[0] != 0, name
        assert swap.params[0] == 768 * 768 + 768  # the closed-form affine map that replaced block 5


def test_a_shape_is_drawn_where_it_is_asked_for():
    """On the CPU by default (the same draws on every machine); elsewhere there, with no copy on the host."""
    small = "EleutherAI/pythia-70m"
    assert next(build_shaped(small).parameters()).device.type == "cpu"
    assert {p.device.type for p in build_shaped(small, dtype=torch.bfloat16, device="meta").parameters()} == {"meta"}


@pytest.mark.slow
def test_weights_are_seeded_by_name_and_revision(loaded):
    final = load_shaped(PYTHIA, revision="step143000", device="cpu")[0]
    for a, b in zip(final.state_dict().values(), loaded[PYTHIA][0].state_dict().values()):
        assert torch.equal(a, b)  # the final checkpoint is the default branch
    early = load_shaped(PYTHIA, revision="step1000", device="cpu")[0]
    assert not torch.equal(early.gpt_neox.embed_in.weight, final.gpt_neox.embed_in.weight)
    assert shaped_seed(PYTHIA, "main") == shaped_seed(PYTHIA) != shaped_seed(PYTHIA, "step2000")
    assert len({shaped_seed(name) for name in SHAPES}) == len(SHAPES)  # one seed per model
    half = load_shaped(LLAMA, dtype="bf16", device="cpu")[0]
    assert half.lm_head.weight.dtype == torch.bfloat16
    assert torch.equal(half.lm_head.weight, loaded[LLAMA][0].lm_head.weight.to(torch.bfloat16))
    with pytest.raises(LinrecError, match="choose one of openai-community/gpt2, EleutherAI/pythia-70m, "):
        load_shaped("EleutherAI/pythia-999m")


@pytest.mark.slow
def test_bos_policy_per_tokenizer(loaded, corpus, tokenizer):
    for name, (_, tok) in loaded.items():
        bos = EXPECTED[name][2]
        assert bos_id(tok) == bos, name
        windows = make_batches(tok, corpus.eval_text, seq_len=16, max_rows=64, layout="head").input_ids
        if bos is None:
            assert bos_policy(tok) == "no BOS"
            assert (windows[:, 0] != tok.bos_token_id).all()
        else:
            assert bos_policy(tok) == "<s> (id 1) at position 0 of every window"
            assert (windows[:, 0] == bos).all() and (windows[:, 1:] != bos).all()
            text = tok(corpus.eval_text[:20_000], add_special_tokens=False)["input_ids"]
            assert windows[:, 1:].flatten().tolist() == text[: windows.shape[0] * 15]  # 15 text tokens a window
    assert bos_id(tokenizer) is None  # a plain byte-level BPE (conftest's) gets nothing either


@pytest.mark.parametrize(
    "train, size, reserved",
    [
        (train_gpt2_tokenizer, 2000, "<|reserved_0|>"),
        (train_neox_tokenizer, 2000, "<|reserved_0|>"),
        (train_llama_tokenizer, 1200, "<reserved_0>"),
    ],
)
def test_a_short_text_is_filled_to_the_exact_size_deterministically(tmp_path, train, size, reserved):
    text = [local_text(3000)]  # about 70 distinct words: far fewer merges than the size asks for
    missing = train(text, size, tmp_path / "a")
    assert missing > 0
    assert train(text, size, tmp_path / "b") == missing
    for file in (tmp_path / "a").iterdir():
        assert file.read_bytes() == (tmp_path / "b" / file.name).read_bytes(), file.name
    tokenizer = load_tokenizer(str(tmp_path / "a"))
    assert len(tokenizer) == size and reserved in tokenizer.get_vocab()
    assert tokenizer.decode(tokenizer(text[0][:500], add_special_tokens=False)["input_ids"]) == text[0][:500]


@pytest.mark.slow
def test_a_saved_shaped_model_loads_as_a_local_checkpoint(loaded, tmp_path):
    """Chapter 9 hands the CLI a shaped model as a directory: it must load with the same weights and tokenizer."""
    path = save_shaped(GPT2, tmp_path / "gpt2")
    model, tokenizer = linrec.load_model(str(path), device="cpu")
    for a, b in zip(model.state_dict().values(), loaded[GPT2][0].state_dict().values()):
        assert torch.equal(a, b)
    text = "Return the 42 items, ok?"
    assert tokenizer(text)["input_ids"] == loaded[GPT2][1](text)["input_ids"]
