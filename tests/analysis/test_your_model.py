"""Practitioner helpers: the headline claims, and the round-trip check of a
replaced model (its own-loss perplexity against linrec's scorer)."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import tiny_model
from linrec.analysis.your_model import own_loss_perplexity, replaced_claims
from linrec.data.tokens import TokenBatches, make_batches
from linrec.interventions.perplexity import perplexity


def test_your_model_claims_take_the_highest_r2_block_and_the_time_ratio():
    from linrec.analysis.your_model import your_model_claims

    swaps = pd.DataFrame({"block": [0, 3], "r2_lin": [0.8, 0.97], "delta_ppl": [5.0, 0.4], "ratio": [8.0, 8.0]})
    swap, ratio = your_model_claims(swaps, {"capture_s": 3.0, "bare_s": 2.0, "tokens": 1024}, "m")
    assert swap.value == 0.4 and "m block 3, R²_lin 0.970" in swap.note and swap.unit == "perplexity"
    assert ratio.value == 1.5 and "1,024 tokens" in ratio.note


def test_own_loss_perplexity_agrees_with_linrecs_scorer_on_padded_windows(tokenizer, text):
    model = tiny_model("llama")
    full = make_batches(tokenizer, text[:5000], seq_len=48, batch_size=5)
    mask = full.attention_mask.clone()
    mask[-3:, 30:] = 0  # the last windows end early, padded (as a short document's window is)
    batches = TokenBatches(full.input_ids.masked_fill(mask == 0, 0), mask, batch_size=5)
    assert own_loss_perplexity(model, batches) == pytest.approx(perplexity(model, batches), rel=1e-6)


def test_the_round_trip_verdict_follows_its_rule():
    record = {
        "ppl": {"base": 10.0, "replaced": 11.0, "delta_ppl": 1.0, "delta_ppl_low": 0.5, "delta_ppl_high": 1.5},
        "params": {"model_before": 100, "model_after": 80},
        "blocks": [{"block": 3}, {"block": 1}],
        "selection": {"max_ppl_increase": "10%"},
    }
    same, cost = replaced_claims(record, 11.0 * (1 + 5e-5), "m")
    assert str(same.verdict) == "yes" and "blocks 3, 1" in same.note and cost.interval == (0.5, 1.5)
    assert str(replaced_claims(record, 11.0 * (1 + 5e-4), "m")[0].verdict) == "no"


def test_the_summary_of_a_selection_that_kept_nothing_names_the_cheapest_block():
    from linrec.analysis.your_model import replaced_summary

    record = {
        "ppl": {"base": 17.6, "replaced": 17.6, "delta_ppl": 0.0, "delta_ppl_low": 0.0, "delta_ppl_high": 0.0},
        "params": {"model_before": 100, "model_after": 100},
        "blocks": [],
        "steps": [{"block": None, "delta_ppl": 0.0}, {"block": 1, "delta_ppl": 1.96}],
        "selection": {"max_ppl_increase": "5%"},
        "second_text": None,
        "latency": {"base_tokens_per_s": 10.0, "replaced_tokens_per_s": 10.0},
    }
    row = replaced_summary(record, None, "g")
    assert row["blocks chosen (in order)"] == "none: the cheapest, block 1, costs +1.96 alone"
    assert row["loaded back"] == "–" and "second text ΔPPL [95% interval]" not in row


def test_the_shipped_row_reads_the_export_and_both_perplexities(tmp_path):
    import json

    from linrec.analysis.your_model import shipped_summary

    (tmp_path / "linrec-export.json").write_text(
        json.dumps({"form": "linrec", "reasons": ["blocks 1, 2: no bias"], "max_logit_difference": 0.0})
    )
    (tmp_path / "weights").write_bytes(b"x" * 2_000_000)
    row = shipped_summary(tmp_path, {"ppl": {"replaced": 12.3456789}}, None)
    assert row["form"] == "linrec" and row["why not plain"] == "blocks 1, 2: no bias" and row["size (MB)"] == 2.0
    assert row["perplexity, linrec's record"] == "12.3457" and row["perplexity, transformers alone"] == "–"
