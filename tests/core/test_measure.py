"""linrec.core.measure: The measurement a practitioner keeps: one capture's per-fold moments with their provenance, and
what they give."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import linrec
from conftest import tiny_model
from linrec.core.capture import CaptureOptions, capture_positions
from linrec.core.fit import DEFAULT_RCOND, fit_affine, rcond_for, recoverability, report_table
from linrec.core.measure import DIGESTS, FILES, Measurement, measure, replacement_candidates
from linrec.core.moments import merge_folds
from linrec.core.replacements import affine_ffn
from linrec.data.tokens import make_batches
from linrec.errors import LinrecError, LinrecWarning
from linrec.models.loading import load_pretrained
from linrec.models.weights_identity import weights_id


def test_measure_is_the_measurements_table_and_the_two_halves_it_replaced(measured, batches):
    model = tiny_model("gpt2")
    table = measure(model, batches, folds=4, progress=False)
    pd.testing.assert_frame_equal(table, measured.table())
    by_hand = report_table(
        recoverability(
            capture_positions(model, batches, options=CaptureOptions(folds=4, progress=False)), DEFAULT_RCOND
        )
    )
    pd.testing.assert_frame_equal(table, by_hand)  # the same columns and numbers as before the object existed
    assert table.first_position_share.notna().all() and table.r2_lin_half_rows.notna().all()


def test_provenance_names_model_weights_tokens_and_versions(model_dirs, batches, tokenizer, text):
    model, _ = load_pretrained(str(model_dirs["llama"]))
    m = Measurement.capture(model, batches, folds=4, progress=False, text="local", text_sha256="abc")
    p = m.provenance
    assert p.model == str(model_dirs["llama"]) and p.weights == weights_id(str(model_dirs["llama"]))
    assert p.weights.startswith("local sha256:")
    assert (p.rows, p.seq_len, p.folds, p.seed, p.skip_first) == (batches.n_rows, 32, 4, 0, 0)
    assert (p.dtype, p.rcond, p.text, p.text_sha256) == ("float32", DEFAULT_RCOND, "local", "abc")
    assert p.versions == {
        "linrec": linrec.__version__,
        "torch": torch.__version__,
        "transformers": p.versions["transformers"],
    }
    assert p.tokens_sha256 == batches.sha256
    other = make_batches(tokenizer, text[1000:], seq_len=32, max_rows=1536, batch_size=16)
    assert other.sha256 != batches.sha256 and other.first(10**6).sha256 == other.sha256


def test_fits_and_replacements_use_the_cutoff_of_the_capture_dtype(batches):
    """A bfloat16 capture rounds the LayerNorm's null direction up to ~1e-6: the float32 cutoff would keep it, so a
    map fitted at DEFAULT_RCOND is not the map the table scored (its null_dims are)."""
    model = tiny_model("gpt2", seed=1).to(torch.bfloat16)
    with pytest.warns(LinrecWarning, match="condition numbers"):
        m = Measurement.capture(model, batches, folds=4, progress=False)
    assert m.provenance.rcond == rcond_for(torch.bfloat16) and m.provenance.dtype == "bfloat16"
    table = m.table().set_index("block")
    fits = m.fits()
    for b, fit in fits.items():
        assert fit.rcond == rcond_for(torch.bfloat16) and fit.null_dims == table.null_dims[b] == 1
        assert fit_affine(merge_folds(m.moments[b]), DEFAULT_RCOND).null_dims == 0  # the mismatch this removes
        installed = m.replacements("affine", [b])[b]
        expected = affine_ffn(fit)
        assert torch.equal(installed.weight, expected.weight) and torch.equal(installed.bias, expected.bias)


def test_unmeasured_blocks_are_refused(batches):
    m = Measurement.capture(tiny_model("gpt2"), batches, blocks=[1], folds=4, progress=False)
    assert m.blocks == [1] and list(m.table().block) == [1]
    for call in (lambda: m.fits([0]), lambda: m.replacements("affine", [0])):
        with pytest.raises(LinrecError, match=r"blocks \[0\] were not measured; this measurement holds blocks \[1\]"):
            call()


def test_candidates_are_one_rule_wherever_they_are_asked_for(measured):
    table = pd.DataFrame({"block": [0, 1, 2], "r2_lin": [0.99, 0.97, 0.5], "r2_lin_std": [0.001, 0.05, 0.001]})
    out = replacement_candidates(table, min_r2=0.95, max_std=0.02).set_index("block")
    assert out.candidate.to_dict() == {0: True, 1: False, 2: False}
    assert out.reason[1].startswith("folds disagree") and out.reason[2] == "R² below 0.95"
    mine = measured.candidates(min_r2=0.5, max_std=1.0)
    assert list(mine.r2_lin) == sorted(mine.r2_lin, reverse=True) and mine.candidate.dtype == bool
    for bad in ({"min_r2": 0.0}, {"min_r2": 1.5}, {"max_std": -1.0}, {"max_std": float("nan")}):
        with pytest.raises(LinrecError, match="min_r2"):
            measured.candidates(**bad)


def test_save_and_load_round_trip_bit_for_bit(measured, tmp_path):
    out = measured.save(tmp_path / "m")
    assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, DIGESTS])
    back = Measurement.load(out)
    assert back.provenance == measured.provenance
    for part in ("first", "later"):
        mine, theirs = getattr(measured.positions, part), getattr(back.positions, part)
        assert sorted(mine) == sorted(theirs)
        for b in mine:
            for a, c in zip(mine[b], theirs[b], strict=True):
                assert a.n == c.n and all(torch.equal(getattr(a, f), getattr(c, f)) for f in ("mean_x", "cxx", "cyy"))
                assert torch.equal(a.cxy, c.cxy) and torch.equal(a.mean_y, c.mean_y)
    pd.testing.assert_frame_equal(back.table(), measured.table())
    with pytest.raises(LinrecError, match="exists and is not empty.*--force"):
        measured.save(out)
    measured.save(out, force=True)
    assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, DIGESTS])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left beside it


def test_a_file_changed_in_place_is_refused_by_its_sha256(measured, tmp_path):
    out = measured.save(tmp_path / "m")
    assert sorted(json.loads((out / DIGESTS).read_text())) == sorted(FILES)
    data = bytearray((out / FILES[2]).read_bytes())
    data[-40:-8] = bytes(255 - b for b in data[-40:-8])  # numbers changed, the size kept
    (out / FILES[2]).write_bytes(bytes(data))
    with pytest.raises(LinrecError, match=r"^\S+/moments-later.safetensors is damaged or missing: its sha256"):
        Measurement.load(out)


def test_damaged_or_missing_files_are_named(measured, tmp_path):
    out = measured.save(tmp_path / "m")
    (out / DIGESTS).unlink()  # as saved before the digests: the files' own checks
    record = (out / FILES[0]).read_text()
    (out / FILES[2]).write_bytes((out / FILES[2]).read_bytes()[:100])
    with pytest.raises(LinrecError, match="damaged"):
        Measurement.load(out)
    (out / FILES[0]).write_text("{not json")
    with pytest.raises(LinrecError, match="cannot read the measurement record .*measurement.json"):
        Measurement.load(out)
    (out / FILES[0]).write_text(json.dumps({"format": 99}))
    with pytest.raises(LinrecError, match="of format 99, not 2 or 3"):
        Measurement.load(out)
    (out / FILES[0]).write_text(json.dumps({"format": 2}))
    with pytest.raises(LinrecError, match="measurement record .*measurement.json is damaged .*missing"):
        Measurement.load(out)
    (out / FILES[0]).write_text(record)
    (out / FILES[3]).write_text("[]")
    with pytest.raises(LinrecError, match="largest rows record .*tails.json holds no JSON object"):
        Measurement.load(out)
    (out / FILES[1]).unlink()
    with pytest.raises(LinrecError, match="lacks moments-first.safetensors"):
        Measurement.load(out)


def test_moments_kept_together_give_the_same_fits_and_a_table_without_first_position_columns(measured, tmp_path):
    """PositionMoments.together (a store that keeps only every row's moments): the same maps and k-fold R²_lin, the
    first-position columns NaN, and a save/load round trip that stays together."""
    from linrec.core.moments import PositionMoments

    together = Measurement(PositionMoments.together(dict(measured.moments)), measured.provenance)
    split, merged = measured.table(), together.table()
    assert merged.first_position_share.isna().all() and merged.r2_lin_after_first.isna().all()
    assert split.first_position_share.notna().all()
    same = ["block", "r2_lin", "r2_lin_std", "r2_lin_half_rows", "null_dims", "d_in", "d_out"]
    pd.testing.assert_frame_equal(merged[same], split[same])
    for b, fit in together.fits().items():
        assert torch.equal(fit.weight, measured.fits()[b].weight) and torch.equal(fit.bias, measured.fits()[b].bias)
    back = Measurement.load(together.save(tmp_path / "together"))
    assert not back.positions.first
    pd.testing.assert_frame_equal(back.table(), merged)


def test_a_released_fold_is_not_served_again_nor_given_rows():
    from linrec.core.accumulator import MomentAccumulator

    acc = MomentAccumulator(3, 2, folds=2)
    acc.add(torch.randn(5, 3), torch.randn(5, 2), fold=0)
    with pytest.raises(LinrecError, match="close"):
        acc.release(0)
    acc.close(0)
    kept = acc.release(0)
    assert kept.n == 5
    with pytest.raises(LinrecError, match="released"):
        acc.moments(0)
    with pytest.raises(LinrecError, match="after it was closed"):
        acc.add(torch.randn(2, 3), torch.randn(2, 2), fold=0)
