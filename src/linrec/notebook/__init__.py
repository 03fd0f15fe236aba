"""What a chapter notebook calls at run time, above the analyses (named for what calls it: in this repository "book"
means only the book itself, ``book/``, its build ``book/bookbuild`` and its executed chapters ``book/chapters``).

A chapter calls :mod:`~linrec.notebook.chapter` (``start``: profile, seed, style; its ``Chapter`` records
numbers in the :mod:`~linrec.notebook.ledger`, shows figures with their data (:mod:`~linrec.notebook.figures`) and
prints its :mod:`~linrec.notebook.provenance`), checks its parameters with :mod:`~linrec.notebook.params` and its
readers' exercise answers with :mod:`~linrec.notebook.exercises`. The book's *build* (papermill scheduling, Colab
notebooks, rendering, checks, the PDF) is not part of the library: it lives beside the chapters, in the
repository's ``book/bookbuild``.
"""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
