"""linrec.notebook.chapter: what every chapter of the book calls first and last: which profile runs, and what ran
where."""

from __future__ import annotations

import sys
import types
import warnings
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from linrec.errors import LinrecError, LinrecWarning
from linrec.experiment.profiles import get_profile
from linrec.notebook import chapter, ledger
from linrec.notebook import chapter as book
from linrec.report import paper
from linrec.report.claims import Claim


@pytest.fixture
def colab(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))


def test_profile_defaults_to_offline_off_colab(monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert book.resolve_profile(None) == "offline"


def test_profile_defaults_to_paper_on_colab_and_an_explicit_name_wins(colab):
    assert book.resolve_profile(None) == "paper"
    assert book.resolve_profile("smoke") == "smoke"


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(LinrecError) as err:
        book.resolve_profile("papr")
    assert all(name in str(err.value) for name in ("paper", "offline", "smoke"))


@pytest.mark.slow
def test_setup_seeds_torch_and_returns_the_profile(capsys):
    assert book.setup("smoke", seed=3, style=False) == "smoke"
    first = torch.rand(3)
    book.setup("smoke", seed=3, style=False)
    assert torch.equal(first, torch.rand(3))
    assert "profile smoke" in capsys.readouterr().out


def test_setup_shows_table_text_in_full():
    try:
        pd.set_option("display.max_colwidth", 50)
        book.setup("smoke", style=False)
        assert pd.get_option("display.max_colwidth") is None
    finally:
        pd.reset_option("display.max_colwidth")


def test_a_gpu_profile_on_the_cpu_warns_with_the_way_out(monkeypatch, capsys):
    monkeypatch.setattr(book, "pick_device", lambda device=None: torch.device("cpu"))
    with pytest.warns(LinrecWarning, match="will take hours"):
        book.setup("paper", style=False)
    out = capsys.readouterr().out
    assert "WARNING" in out and "Runtime → Change runtime type" in out and "PROFILE = 'offline'" in out


@pytest.mark.parametrize("profile, device", [("paper", "cuda"), ("offline", "cpu"), ("smoke", "cpu")])
def test_no_cpu_warning_on_a_gpu_or_for_a_cpu_profile(monkeypatch, capsys, profile, device):
    monkeypatch.setattr(book, "pick_device", lambda d=None: torch.device(device))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LinrecWarning)
        book.setup(profile, style=False)
    assert "WARNING" not in capsys.readouterr().out


def test_the_cpu_warning_follows_a_device_override(monkeypatch):
    monkeypatch.setattr(book, "pick_device", lambda d=None: torch.device(d or "cuda"))
    with pytest.warns(LinrecWarning):
        book.setup("paper", style=False, device="cpu")


def test_progress_bars_are_on_unless_the_build_turns_them_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    monkeypatch.delenv("LINREC_PROGRESS", raising=False)
    assert book.start("02_x", "smoke", style=False).progress is True
    monkeypatch.setenv("LINREC_PROGRESS", "0")
    assert book.start("02_x", "smoke", style=False).progress is False
    monkeypatch.setenv("LINREC_PROGRESS", "maybe")
    with pytest.raises(LinrecError, match="LINREC_PROGRESS must be one of"):
        book.progress_bars()


def test_a_profile_dict_changes_fields_and_a_bad_one_fails_first(capsys):
    ch = book.start("00_test", {"name": "smoke", "eval_tokens": 999, "probe": {"steps": 7}}, style=False)
    assert (ch.profile.name, ch.profile.eval_tokens, ch.profile.probe.steps) == ("smoke", 999, 7)
    assert ch.profile.probe.rank == book.get_profile("smoke").probe.rank  # a probe dict changes only what it names
    assert "profile fields changed: eval_tokens=999" in capsys.readouterr().out
    with pytest.raises(LinrecError, match="needs its profile's name under 'name'"):
        book.start("00_test", {"eval_tokens": 999}, style=False)
    with pytest.raises(LinrecError, match="unknown profile field"):
        book.start("00_test", {"name": "smoke", "tokens": 1}, style=False)


def test_begin_checks_the_parameters_then_starts_with_the_chapters_profile_and_seed(monkeypatch):
    """One set-up call: a bad parameter fails before anything runs; then start(PROFILE, SEED), and PROFILE becomes
    the resolved profile's name."""
    started = []
    monkeypatch.setattr(book, "start", lambda name, profile, seed, style: started.append((name, profile, seed)) or
                        types.SimpleNamespace(profile=types.SimpleNamespace(name=profile or "offline")))  # fmt: skip
    params = {"PROFILE": None, "SEED": 3, "ROWS": -1}
    with pytest.raises(LinrecError, match="^parameter ROWS must be a positive integer; got -1$"):
        book.begin("00_test", params, positive_int=["ROWS"])
    params["SEED"] = 1.5
    with pytest.raises(LinrecError, match="^parameter SEED must be an integer; got 1.5$"):  # SEED is always checked
        book.begin("00_test", params)
    assert not started
    params.update(SEED=3, ROWS=8)
    book.begin("00_test", params, positive_int=["ROWS"])
    assert started == [("00_test", None, 3)] and params["PROFILE"] == "offline"


def test_a_chapter_warns_before_training_a_missing_zoo(tmp_path, monkeypatch, capsys):
    from linrec.cache import build_entry
    from linrec.models.zoo import build as zoo_build
    from linrec.models.zoo import zoo_missing, zoo_model_path

    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    # the cache keys need the corpora's hashes only: stand-ins spare building the corpora
    monkeypatch.setattr(
        zoo_build,
        "_corpora",
        lambda spec: {c: SimpleNamespace(sha256=c) for c in [*spec.train_corpora, *spec.eval_corpora]},
    )
    smoke = get_profile("smoke")
    names = smoke.zoo.names()
    assert zoo_missing(smoke.zoo) == names
    assert chapter.warn_if_zoo_missing(smoke)
    out = capsys.readouterr().out
    assert f"The model zoo 'smoke' is not in the cache ({tmp_path})" in out and f"trains {len(names)} model(s)" in out
    for name in names:  # every model's entry complete: nothing to train, nothing to warn about
        build_entry(zoo_model_path(smoke.zoo, name).parent, lambda tmp: (tmp / "zoo.json").write_text("{}"))
    assert zoo_missing(smoke.zoo) == [] and not chapter.warn_if_zoo_missing(smoke)
    assert capsys.readouterr().out == ""
    assert not chapter.warn_if_zoo_missing(get_profile("paper"))  # no zoo at all


def test_chapter_start_clears_its_ledger_and_records_under_its_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    ledger.record("smoke", "02_x", [Claim.measure("stale", 1.0)])
    ch = chapter.start("02_x", "smoke", seed=3, style=False, eval_tokens=1024)
    assert "profile smoke" in capsys.readouterr().out
    assert ch.profile.name == "smoke" and ch.profile.eval_tokens == 1024 and ch.seed == 3
    assert ledger.ledger("smoke").empty  # the stale entry of 02_x is gone
    table = ch.report([Claim.measure(paper.R2_RANGE, "0.1 to 0.9"), Claim.check("a", "p", "m", False, rule="r")])
    assert list(ledger.ledger("smoke").quantity) == ["R²_lin range across blocks", "a"]
    assert list(table.frame.claim) == ["a"] and list(table.frame.reproduced) == ["no"]  # shown without an index
    assert ch.report([Claim.measure("a number", 2.0)]) is None
    assert "a number" in list(ledger.ledger("smoke").quantity)
    assert "profile smoke" in str(ch.provenance())
