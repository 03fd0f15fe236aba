"""linrec.experiment.validation: What a valid profile is: the rules :meth:`linrec.experiment.profiles.Profile.validate`
applies, field by field."""

from __future__ import annotations

import pytest

from linrec import LinrecError
from linrec.experiment.profiles import get_profile


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"folds": 1}, "folds must be an integer of at least 2"),
        ({"seq_len": 0}, "seq_len must be a positive integer"),
        ({"corpora": ["stdlib-prose", "wikipedia"]}, "choose from stdlib-prose, stdlib-code"),
        ({"models": ["zoo-gpt3"]}, "zoo-gpt2, zoo-neox, zoo-llama"),
        ({"device": "tpu"}, "cpu, cuda, cuda:N, mps"),
        ({"dtype": "float8"}, "float32"),
        ({"seeds": []}, "seeds"),
        ({"rows_per_block": 100}, "too few for zoo-gpt2's width 128 .*whole 128-token sequences; use at least"),
        ({"seq_len": 4096}, "context of 128"),
        ({"probe": {"rank": 0}}, "probe.rank"),
        ({"probe": {"rnak": 4}}, "valid: rank, sample_rows, steps, lr"),
        ({"colour": "red"}, "valid fields: name, description, models"),
        ({"evaluations": ["zero-shot", "wikitext2 ppl"]}, "evaluations: task names cannot contain spaces"),
        ({"evaluations": ["piqa", "humaneval"]}, "humaneval is chapter 12's own setting"),
    ],
)
def test_bad_values_are_rejected_with_the_valid_ones(overrides, message):
    with pytest.raises(LinrecError, match=message):
        get_profile("offline", **overrides)
