"""The method chapter's data-flow diagram."""

from __future__ import annotations

import matplotlib.pyplot as plt


def draw_pipeline() -> plt.Figure:
    """Boxes and arrows: corpus -> forward pass with hooks -> moments -> closed-form fit -> R²."""
    fig, ax = plt.subplots(figsize=(12, 4.2))
    steps = [
        (0.10, 0.72, "text corpus\n(profile's corpus)"),
        (0.36, 0.72, "token batches\nseq_len tokens each;\nfold = f(sequence, seed)"),
        (0.64, 0.72, "frozen LM, one forward pass\nhooks at every FFN block:\nX = input, Y = output"),
        (0.90, 0.72, "rows (x, y)\none per token,\nnever stored"),
        (0.90, 0.22, "float64 moments per fold\nn, x̄, ȳ, Cxx, Cxy, Cyy\nO(d²) memory"),
        (0.60, 0.22, "closed-form affine fit\non k−1 folds:\nW = Cxx⁺ Cxy,  b = ȳ − x̄W"),
        (0.28, 0.22, "held-out R²_lin\non the k-th fold,\nfrom its moments alone"),
        (0.05, 0.22, "mean ± std\nover k folds"),
    ]
    boxes = [ax.text(x, y, text, ha="center", va="center", fontsize=9,
                     bbox=dict(boxstyle="round,pad=0.5", facecolor="#eef3fb", edgecolor="#4c72b0"))
             for x, y, text in steps]
    fig.canvas.draw()  # box sizes are known only after a draw
    for (x0, y0, _), (x1, y1, _), a, b in zip(steps, steps[1:], boxes, boxes[1:]):
        if y0 != y1:
            start, end = (0.5, 0.0), (0.5, 1.0)  # straight down
        else:
            start, end = ((1.0, 0.5), (0.0, 0.5)) if x1 > x0 else ((0.0, 0.5), (1.0, 0.5))
        ax.annotate("", xy=end, xycoords=b, xytext=start, textcoords=a,
                    arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.3, shrinkA=4, shrinkB=4))
    ax.text(0.5, 0.47, "below the line only moments exist: memory does not grow with the token count",
            ha="center", fontsize=8.5, style="italic", color="#555555")
    ax.axhline(0.43, xmin=0.02, xmax=0.98, color="#bbbbbb", lw=0.8, ls="--")
    ax.set(xlim=(-0.05, 1.02), ylim=(0.0, 0.95))
    ax.axis("off")
    ax.set_title("Distillation as measurement: from a frozen model to one number per block")
    return fig
