"""The book's runtime, above the analyses: what a chapter calls and how the book is built.

A chapter calls :mod:`~linrec.book.chapter` (``start``: profile, seed, style; its ``Chapter`` records
numbers in the :mod:`~linrec.book.ledger` and prints its :mod:`~linrec.book.provenance`) and checks its
parameters with :mod:`~linrec.book.params`. ``book/build.py`` drives the build: :mod:`~linrec.book.notebooks`
(percent-format sources to Colab notebooks whose install cell installs the release), :mod:`~linrec.book.execute`
(papermill, chapters in parallel), :mod:`~linrec.book.render` (Jupyter Book, local MathJax),
:mod:`~linrec.book.check` (what a built book must satisfy), :mod:`~linrec.book.reader` (every page read in
headless Chromium, :mod:`~linrec.book.browser`, as a reader meets it) and :mod:`~linrec.book.pdf` (the book as
one PDF). The build modules need the ``book`` extra
(jupytext, nbformat, papermill, jupyter-book); a chapter needs only the runtime.
"""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
