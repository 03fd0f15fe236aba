"""linrec export: the command says what it wrote and how to load it, and refuses what is no replacement directory
before any work."""

from __future__ import annotations

from linrec.cli import main


def test_the_command_says_what_it_wrote_and_refuses_what_is_no_replacement(made, tmp_path, capsys, model_dirs):
    assert main(["export", str(made("gpt2", "remove")), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "a plain checkpoint; load it with AutoModelForCausalLM.from_pretrained(" in out
    assert main(["export", str(model_dirs["gpt2"]), "--out", str(tmp_path / "p")]) == 2
    assert "is no replacement directory" in capsys.readouterr().err and not (tmp_path / "p").exists()
    assert main(["export", str(made("gpt2", "remove")), "--out", str(tmp_path / "o")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
