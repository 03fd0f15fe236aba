"""Figures of the linrec book: one module per kind of figure, each returning a matplotlib Figure."""

from linrec._lazy import lazy
from linrec.errors import LinrecError

__getattr__, __dir__ = lazy(__name__, globals())


def use_book_style() -> None:
    """The book's look (seaborn, white grid, colour-blind palette), for its chapters and ``linrec plot`` alike."""
    try:
        import seaborn as sns
    except ImportError as err:
        raise LinrecError("the book's figures need seaborn: pip install 'linrec[book]'") from err
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
