"""A planted chapter source, the repository as a Book, and book/build.py loaded as a module, for the build's tests."""

from __future__ import annotations

import importlib.machinery
import importlib.util

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


def _build_script():
    spec = importlib.util.spec_from_file_location("build_script", ROOT / "book" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
