"""Figures of the linrec book: one module per kind of figure, each returning a matplotlib Figure."""
