"""linrec.experiment.budgets: What one model of a profile is measured with: the trained probes' settings, and a model's
own budget (rows, main corpus, evaluation tokens, row sample, and which blocks the costly trained steps cover) where its
sizes differ from its profile's, as a real model's do: 64 rows per input dimension of its width. Fixed before any
result."""

from __future__ import annotations

import pytest

from linrec import LinrecError
from linrec.experiment.profiles import PROFILES, get_profile


def test_a_real_model_has_its_own_budget_and_the_others_the_profile_sizes():
    offline = PROFILES["offline"]
    smol, gemma, zoo = (offline.budget(m) for m in ("smollm2-135m", "gemma3-270m", "zoo-gpt2"))
    assert (smol.rows_per_block, gemma.rows_per_block) == (64 * 576, 64 * 640)  # 64 rows per input dimension
    assert smol.corpus == gemma.corpus == "kjv-bible" == offline.eval_corpus_of("gemma3-270m")
    assert smol.eval_tokens == 8192 and (smol.every, gemma.every) == (10, 6)
    assert (zoo.rows_per_block, zoo.corpus, zoo.eval_tokens, zoo.every) == (8192, "stdlib-prose", 32_768, 1)
    assert offline.eval_corpus_of("zoo-gpt2") == offline.eval_corpus
    changed = get_profile("offline", budgets={"gemma3-270m": {"rows_per_block": 2048}})  # a notebook's dict
    assert changed.budget("gemma3-270m").rows_per_block == 2048 and changed.budget("gemma3-270m").every == 6
    assert changed.budget("smollm2-135m") == smol  # the models it does not name keep their budgets
    with pytest.raises(LinrecError, match="too few for gemma3-270m's width 640"):
        get_profile("offline", budgets={"gemma3-270m": {"rows_per_block": 100}})
    with pytest.raises(LinrecError, match="needs a mapping of budget fields"):
        get_profile("offline", budgets={"gemma3-270m": {"rows": 100}})
    assert get_profile("offline", models=["zoo-gpt2"]).packaged == ()  # budgets of models left out are ignored
    with pytest.raises(LinrecError, match="not one of its corpora"):
        get_profile("offline", budgets={"gemma3-270m": {"corpus": "wikitext-2"}})
    with pytest.raises(LinrecError, match="has no model 'zoo-gpt3'"):
        offline.budget("zoo-gpt3")
