"""A planted chapter source and the repository as a Book, for the build's tests."""

from __future__ import annotations

from bookbuild.layout import Book
from conftest import ROOT

REPO = Book(ROOT)


SOURCE = """# %% [markdown]
# # A chapter

# %% tags=["parameters"]
PROFILE = None

# %%
print(PROFILE)
"""
