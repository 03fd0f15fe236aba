"""What a figure drew, read back for the figure tests."""

import numpy as np


def points(ax) -> np.ndarray:
    return np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets())])
