"""linrec.data.bpe: A byte-level BPE tokenizer trained here, saved so that ``AutoTokenizer.from_pretrained(path)`` loads
it."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from linrec import LinrecError
from linrec.data.bpe import EOS, train_bpe


def test_tokenizer_round_trips_and_trains_deterministically(tmp_path):
    texts = ["def f(x):\n\treturn x + 1  # add\n", "The quick brown fox, naïvely.\r\n\n"] * 40
    texts.append(" ".join(f"item_{i} costs {i * 7 % 100} coins" for i in range(500)))
    tok = train_bpe(texts, 300, tmp_path / "a")
    train_bpe(texts, 300, tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (tmp_path / "b" / "tokenizer.json").read_text()
    loaded = AutoTokenizer.from_pretrained(str(tmp_path / "a"))
    assert len(loaded) == 300 and loaded.eos_token == EOS and loaded.pad_token_id == loaded.eos_token_id
    for s in ["def f(x):\n\treturn x + 1  # add\n", "unseen: 漢字 😀 ü\u00a0\x00end", "  leading and trailing  ", ""]:
        ids = loaded(s, add_special_tokens=False)["input_ids"]
        assert loaded.decode(ids) == s
        assert ids == tok(s, add_special_tokens=False)["input_ids"]
    with pytest.raises(LinrecError, match="at least 257"):
        train_bpe(texts, 100)
