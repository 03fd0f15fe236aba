"""linrec.experiment.measurement: Capture once, analyse many: the cached measurement of one (profile, model, checkpoint,
corpus)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from conftest import measurement_info
from linrec.core.fit import recoverability, report_table
from linrec.core.sample import Rows
from linrec.data.corpus import Corpus
from linrec.errors import LinrecError
from linrec.experiment import measurement as m
from linrec.experiment.profiles import get_profile
from support.measurement_store import SHAPES, SMOKE


def test_a_damaged_measurement_is_captured_again(tmp_path, monkeypatch):
    """measurement() with the capture replaced by a known result: it is stored, loaded, and recaptured when damaged."""
    import torch

    from linrec.data.corpus import Corpus
    from linrec.errors import LinrecError
    from linrec.experiment import measurement as m
    from linrec.experiment.profiles import get_profile

    g = torch.Generator().manual_seed(0)
    rows = Rows(torch.randn(200, 4, generator=g), torch.randn(200, 4, generator=g), torch.arange(200) % 5)
    known = m.ProfileMeasurement.assembled(
        measurement_info("zoo-gpt2", corpus="toy"), {0: rows.fold_moments(5)}, {0: rows}
    )
    captures = []
    smoke = get_profile("smoke")

    def capture(*args) -> m.ProfileMeasurement:
        captures.append(1)
        return known

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    monkeypatch.setattr(m, "_capture", capture)
    monkeypatch.setattr(
        m, "profile_corpus", lambda profile, name: Corpus("toy", "prose", "fit text", "eval text", "test")
    )
    monkeypatch.setattr(m, "zoo_model_path", lambda zoo, model, checkpoint: tmp_path / "weights")

    def same(result: m.ProfileMeasurement) -> bool:
        return (
            result.info == known.info
            and torch.equal(result.samples[0].x, rows.x)
            and result.table().equals(known.table())
        )

    assert same(m.measurement(smoke, "zoo-gpt2")) and same(m.measurement(smoke, "zoo-gpt2")) and len(captures) == 1
    (entry,) = (tmp_path / "measurements").glob("smoke-zoo-gpt2-*")
    with (entry / "moments.safetensors").open("r+b") as f:
        f.truncate(64)
    with pytest.warns(UserWarning, match=str(entry)):
        assert same(m.measurement(smoke, "zoo-gpt2"))
    (entry / "info.json").unlink()
    with pytest.warns(UserWarning, match=str(entry)):
        assert same(m.measurement(smoke, "zoo-gpt2"))
    assert same(m.measurement(smoke, "zoo-gpt2", refresh=True))
    assert len(captures) == 4 and same(m.measurement(smoke, "zoo-gpt2")) and len(captures) == 4

    def flip(name: str, at: int) -> None:  # one byte changed, the size kept
        data = bytearray((entry / name).read_bytes())
        data[at] ^= 0x01
        (entry / name).write_bytes(bytes(data))

    held = m.measurement(smoke, "zoo-gpt2")
    for damage in (
        lambda: flip("moments.safetensors", -5),  # tensor data
        lambda: flip("samples.safetensors", 12),  # the header
        lambda: (entry / "table.json").write_text("[not json"),
    ):
        damage()
        with pytest.raises(LinrecError, match="changed on disk after it was opened"):
            held.moments[0]  # a handle opened before the damage serves no changed byte
        with pytest.warns(UserWarning, match=str(entry)) as warned:
            held = m.measurement(smoke, "zoo-gpt2")
            assert same(held)
        assert len(warned) == 1
    assert len(captures) == 7


def test_a_table_only_entry_keeps_the_table_and_refuses_the_rest_with_advice(store, tmp_path):
    known, captures = store
    result = m.measurement(SMOKE, "zoo-gpt2", keep="table")
    pd.testing.assert_frame_equal(result.table(), known.table())
    assert result.blocks == [0, 1, 2]
    for part in (result.moments, result.samples):
        with pytest.raises(LinrecError, match="keep='(moments|samples)'"):
            part[0]
    (entry,) = (tmp_path / "measurements").glob("smoke-*")
    assert sorted(p.name for p in entry.iterdir() if not p.name.startswith(".")) == [
        "info.json",
        "measurement.json",
        "table.json",
    ]


def test_asking_for_more_than_an_entry_keeps_captures_again_and_less_reuses_it(store):
    known, captures = store
    m.measurement(SMOKE, "zoo-gpt2", keep="table")
    fuller = m.measurement(SMOKE, "zoo-gpt2", keep="moments")
    assert captures == ["table", "moments"]
    assert torch.equal(fuller.moments[1][2].cxy, known.moments[1][2].cxy)
    with pytest.raises(LinrecError, match="keep='samples'"):
        fuller.samples[0]
    m.measurement(SMOKE, "zoo-gpt2", keep="table")
    m.measurement(SMOKE, "zoo-gpt2", keep="moments")
    full = m.measurement(SMOKE, "zoo-gpt2")
    assert captures == ["table", "moments", "samples"]
    assert torch.equal(full.samples[2].y, known.samples[2].y) and full.samples[2].y.dtype == torch.float32
    with pytest.raises(LinrecError, match="unknown keep"):
        m.measurement(SMOKE, "zoo-gpt2", keep="everything")


def test_a_reloaded_measurement_gives_the_same_tables_and_fits(store):
    known, _ = store
    lazy = m.measurement(SMOKE, "zoo-gpt2")
    recomputed = report_table(recoverability(lazy.moments))  # from the moments read back, not the stored table
    expected = report_table(recoverability(known.moments))
    pd.testing.assert_frame_equal(recomputed, expected, rtol=1e-12, atol=1e-12)
    pd.testing.assert_frame_equal(lazy.table(), known.table())  # the stored table, bit for bit
    assert lazy.rcond == known.rcond and lazy.provenance == known.provenance
    for b, fit in lazy.fits().items():
        assert torch.equal(fit.weight, known.fits()[b].weight)
    pd.testing.assert_frame_equal(lazy.candidates(min_r2=0.5), known.candidates(min_r2=0.5))
    for b, module in lazy.replacements("lowrank:2", [1]).items():
        assert all(
            torch.equal(a, c)
            for a, c in zip(module.state_dict().values(), known.replacements("lowrank:2", [1])[b].state_dict().values())
        )


def test_one_entry_per_distinct_weights_labelled_as_asked(store, tmp_path):
    """Pythia's step143000 is its main branch: one capture serves both names, each labelled as asked for."""
    _, captures = store
    pythia = "EleutherAI/pythia-160m"
    m.forget_used()
    final = m.measurement(SHAPES, pythia, keep="table")
    last = m.measurement(SHAPES, pythia, checkpoint="step143000", keep="table")
    assert captures == ["table"]
    assert (final.info.checkpoint, last.info.checkpoint) == ("final", "step143000")
    assert set(last.table()["checkpoint"]) == {"step143000"} and set(final.table()["checkpoint"]) == {"final"}
    m.measurement(SHAPES, pythia, checkpoint="step0", keep="table")
    m.measurement(SHAPES, pythia, checkpoint="init", keep="table")  # init is step0
    assert captures == ["table", "table"]
    assert [i.checkpoint for i in m.used_measurements()] == ["final", "step143000", "step0", "init"]


def test_the_cache_key_holds_the_resolved_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    text, paper = Corpus("toy", "prose", "fit", "eval", "test"), get_profile("paper")
    gpt2 = "openai-community/gpt2"
    at = {rev: m.entry_path(paper, gpt2, "final", text, rev) for rev in (None, "a" * 40, "b" * 40)}
    assert len(set(at.values())) == 3
    assert m.entry_path(paper, gpt2, "final", text, "a" * 40) == at["a" * 40]


def test_a_zoo_measurement_is_keyed_by_its_weights_not_by_where_the_cache_is(tmp_path, monkeypatch):
    """Moving a cache keeps its measurements; a retrained zoo model (a new training key) does not."""
    text, smoke = Corpus("toy", "prose", "fit", "eval", "test"), get_profile("smoke")
    where = {}
    monkeypatch.setattr(m, "zoo_model_path", lambda zoo, model, ckpt: where["cache"] / "zoo" / where["dir"] / ckpt)
    names, weights = {}, {}
    for cache in ("here", "moved"):
        for trained in ("zoo-gpt2-1111", "zoo-gpt2-2222"):
            where.update(cache=tmp_path / cache, dir=trained)
            monkeypatch.setenv("LINREC_CACHE", str(tmp_path / cache))
            names[cache, trained] = m.entry_path(smoke, "zoo-gpt2", "final", text).name
            weights[cache, trained] = m.profile_weights_id(smoke, "zoo-gpt2", "final")
    assert names["here", "zoo-gpt2-1111"] == names["moved", "zoo-gpt2-1111"]
    assert names["here", "zoo-gpt2-1111"] != names["here", "zoo-gpt2-2222"]
    assert weights["moved", "zoo-gpt2-2222"] == "zoo-gpt2-2222/final"
    assert m.profile_weights_id(get_profile("paper"), "openai-community/gpt2", "final") is None


def test_a_local_model_replaced_in_place_is_measured_afresh(tmp_path, monkeypatch, tokenizer, text):
    """A profile naming a local directory: weights replaced under the same path give a new key and their own R²,
    as measuring the new model directly gives them (the cache served the old model's R² when keyed by path)."""
    from conftest import tiny_model
    from linrec.cache import cache_dir
    from linrec.core.measure import measure
    from linrec.experiment.resolve import profile_batches
    from linrec.models.loading import load_pretrained

    model_dir = tmp_path / "model"

    def save(seed: int, gain: float) -> None:
        model = tiny_model("gpt2", seed)
        with torch.no_grad():
            for layer in model.transformer.h:
                layer.mlp.c_fc.weight.mul_(gain)  # a larger gain: a more nonlinear block, a lower R²
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)

    corpus = Corpus("local", "prose", text, text, "test")
    monkeypatch.setattr(m, "profile_corpus", lambda profile, name: corpus)
    save(0, 1.0)
    local = get_profile("smoke", zoo=None, models=(str(model_dir),), seq_len=32, rows_per_block=640)
    first = m.measurement(local, str(model_dir), keep="table", progress=False).table()
    assert m.measurement(local, str(model_dir), keep="table", progress=False).table().equals(first)  # cached
    save(0, 8.0)
    second = m.measurement(local, str(model_dir), keep="table", progress=False).table()
    assert len(list((cache_dir() / "measurements").glob(f"smoke-*{tmp_path.name}*"))) == 2
    net, tok = load_pretrained(str(model_dir))
    truth = measure(net, profile_batches(local, tok, corpus), folds=local.folds, seed=0, progress=False)
    assert (first["r2_lin"] - second["r2_lin"]).min() > 0.05
    assert torch.allclose(torch.tensor(second["r2_lin"]), torch.tensor(truth["r2_lin"]), rtol=0, atol=1e-12)


def test_a_profile_measurement_is_the_cores_measurement_of_the_same_rows(tmp_path, monkeypatch, tokenizer, text):
    """measurement() captures with linrec.core.measure.Measurement.capture: its stored table (first-position columns
    included), maps, candidates and replacements, read back from the cache, equal the core's on the same batches."""
    from conftest import tiny_model
    from linrec.core.measure import Measurement
    from linrec.experiment.resolve import profile_batches
    from linrec.models.loading import load_pretrained

    model_dir = tmp_path / "model"
    tiny_model("llama", 0).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    corpus = Corpus("local", "prose", text, text, "test")
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(m, "profile_corpus", lambda profile, name: corpus)
    local = get_profile("smoke", zoo=None, models=(str(model_dir),), seq_len=32, rows_per_block=640)
    m.measurement(local, str(model_dir), keep="moments", progress=False)
    stored = m.measurement(local, str(model_dir), keep="moments", progress=False)  # read back, lazily
    net, tok = load_pretrained(str(model_dir))
    batches = profile_batches(local, tok, corpus)
    core = Measurement.capture(net, batches, folds=local.folds, seed=0, progress=False,
                               extras=["output-covariance"])  # as shared  # fmt: skip
    assert isinstance(stored, Measurement) and stored.rcond == core.rcond
    assert stored.provenance.tokens_sha256 == core.provenance.tokens_sha256 and stored.provenance.weights
    pd.testing.assert_frame_equal(stored.table().drop(columns=["model", "checkpoint", "corpus"]), core.table())
    assert stored.table()["first_position_share"].notna().all()
    for b, fit in stored.fits().items():
        assert torch.equal(fit.weight, core.fits()[b].weight) and torch.equal(fit.bias, core.fits()[b].bias)
    pd.testing.assert_frame_equal(stored.candidates(min_r2=0.5).reset_index(drop=True).drop(
        columns=["model", "checkpoint", "corpus"]), core.candidates(min_r2=0.5).reset_index(drop=True))  # fmt: skip
    for kind in ("mean", "lowrank:3"):
        mine, theirs = stored.replacements(kind, [1])[1], core.replacements(kind, [1])[1]
        assert all(torch.equal(a, c) for a, c in zip(mine.state_dict().values(), theirs.state_dict().values()))
