"""linrec.core.schemes: the names of a capture's product schemes, read one way and refused with the choices before
torch loads."""

from __future__ import annotations

import pytest

from linrec.core.schemes import SCHEMES, ozaki_slices, parse_products
from linrec.errors import LinrecError
from support.cli import heavy_imports


def test_schemes_are_named_spelt_one_way_and_refused_with_the_choices():
    assert parse_products(None) == parse_products(" Float64 ") == "float64"
    assert parse_products("ozaki: 4") == parse_products("OZAKI:04") == "ozaki:4"
    assert list(SCHEMES) == ["float64", "float32", "ozaki:S"]
    for wrong in ("float16", "ozaki", "ozaki:2", "ozaki:9", "ozaki:x", "tf32"):
        with pytest.raises(LinrecError, match=f"unknown products '{wrong}': choose from float64 .* ozaki:S with S"):
            parse_products(wrong)
    assert heavy_imports("linrec.core.schemes") == []


def test_an_ozaki_scheme_s_slices_are_read_from_its_name():
    names = ("ozaki:3", "ozaki:8", "float32", "float64")
    assert [ozaki_slices(parse_products(name)) for name in names] == [3, 8, None, None]
