"""The build of the linrec book, beside its chapters and not installed with ``pip install linrec``.

``book/build.py`` is its command line (``make book``, ``make book-check``, ``make book-pdf``):
:mod:`~bookbuild.notebooks` (percent-format sources to Colab notebooks whose install cell installs the release,
:mod:`~bookbuild.colab`), :mod:`~bookbuild.execute` (papermill, chapters in parallel, the measurements they share
captured first by :mod:`~bookbuild.prepare`, wall times kept by :mod:`~bookbuild.timing`),
:mod:`~bookbuild.render` (Jupyter Book, local MathJax, :mod:`~bookbuild.publish`), :mod:`~bookbuild.check` (what a
built book must satisfy), :mod:`~bookbuild.reader` (every page read in headless Chromium,
:mod:`~bookbuild.browser`, as a reader meets it), :mod:`~bookbuild.pdf` (the book as one PDF) and
:mod:`~bookbuild.compare` (two copies of executed chapters, to the last printed digit); where the book's
files are: :mod:`~bookbuild.layout`. It needs the ``book`` extra (jupytext, nbformat, papermill, jupyter-book).
"""
