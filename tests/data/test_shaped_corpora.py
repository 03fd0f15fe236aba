"""linrec.data.shaped_corpora: Shaped corpora: local files laid out like the paper's hub datasets, to exercise shapes,
not science."""

from __future__ import annotations

import json

import pytest

import linrec.data.shaped_corpora as shaped_corpora
from linrec.data.corpora import corpus_names, load_corpus
from linrec.data.shaped_corpora import SHAPED_CORPORA, wikitext_line, wikitext_rows


def test_wikitext_tokenisation_is_planted_exactly():
    line = wikitext_line("The well-known 1,000 items cost 3.5 dollars (each); it's fine.")
    assert line == " The well @-@ known 1 @,@ 000 items cost 3 @.@ 5 dollars ( each ) ; it 's fine . \n"
    filler = " More words follow here." * 20  # paragraphs of WikiText's row length stay whole
    text = "\n\n".join(f"Paragraph {i} says a thing-or-two.{filler}" for i in range(20))
    rows, cycles = wikitext_rows(text, 20_000)
    once = rows[: len(rows) // cycles]
    assert rows == once * cycles and cycles == -(-20_000 // sum(map(len, once)))
    assert once[:3] == ["", " = Paragraph 0 says = \n", ""]
    assert once[3].startswith(" Paragraph 0 says a thing @-@ or @-@ two . More words")
    assert once[4].startswith(" Paragraph 1 says")  # rows of one section follow each other, as in WikiText
    assert " = = Paragraph 4 says = = \n" in once and " = Paragraph 16 says = \n" in once
    assert len(once) == 20 + 3 * 5 and all(r == "" or (r.startswith(" ") and r.endswith(" \n")) for r in rows)
    short, _ = wikitext_rows("One.\n\nTwo.\n \nThree.", 1)  # short paragraphs merge into one row
    assert short == ["", " = One . Two . Three . = \n", "", " One . Two . Three . \n"]


@pytest.mark.slow
def test_shaped_corpora_have_the_paper_layouts_and_come_through_datasets(shaped_cache, monkeypatch):
    read = []
    real = shaped_corpora._local_rows

    def spy(builder, files, *args, **kwargs):
        rows = real(builder, files, *args, **kwargs)
        read.append((builder, type(rows).__name__))
        return rows

    monkeypatch.setattr(shaped_corpora, "_local_rows", spy)
    shaped = {name: load_corpus(name) for name in SHAPED_CORPORA}
    assert set(SHAPED_CORPORA) <= set(corpus_names())
    assert {b for b, _ in read} == {"parquet", "json", "text"} and {t for _, t in read} == {"IterableDataset"}
    wiki = shaped["shaped-wikitext-2"]
    assert len(wiki.eval_text) >= 600_000 and len(wiki.fit_text) >= 10_000_000
    assert " @-@ " in wiki.fit_text and "\n = = " in wiki.fit_text and wiki.fit_text.startswith(" = ")
    assert "not for science" in wiki.source and "cycled" in wiki.source
    code = shaped["shaped-codeparrot"]
    assert code.domain == "code" and len(code.fit_text) >= 4_000_000 and "def " in code.eval_text
    first = json.loads((next(shaped_cache.glob("corpora/shaped-files-codeparrot-*")) / "train.json").open().readline())
    assert set(first) == {"repo_name", "path", "content", "size"} and first["size"] == len(first["content"])
    story = shaped["shaped-tinystories"]
    assert all("\n" not in row for row in story.eval_text.split("\n\n"))
    monkeypatch.setattr(shaped_corpora, "_local_rows", lambda *a, **k: pytest.fail("rows read again"))  # slices now
    assert {n: load_corpus(n).sha256 for n in SHAPED_CORPORA} == {n: c.sha256 for n, c in shaped.items()}
