"""What a chapter of the book calls at run time, above the analyses.

A chapter calls :mod:`~linrec.book.chapter` (``start``: profile, seed, style; its ``Chapter`` records
numbers in the :mod:`~linrec.book.ledger`, shows figures with their data (:mod:`~linrec.book.figures`) and
prints its :mod:`~linrec.book.provenance`), checks its parameters with :mod:`~linrec.book.params` and its
readers' exercise answers with :mod:`~linrec.book.exercises`. The book's *build* (papermill scheduling, Colab
notebooks, rendering, checks, the PDF) is not part of the library: it lives beside the chapters, in the
repository's ``book/bookbuild``.
"""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
