"""What each column of the recoverability table (:func:`linrec.core.fit.report_table`) means: the one description
``linrec measure --help`` and the docs use.

Its own module, free of torch, so that building the command's parser (whose help lists the columns) does not import
torch before the options are checked.
"""

from __future__ import annotations

from linrec.core.scores import COLUMNS as SCORES

COLUMNS = {
    "block": "index of the FFN block, 0 = nearest the input",
    "r2_lin": "held-out R²_lin: share of the block's output variance its affine map recovers, mean over the k folds",
    "r2_lin_std": "standard deviation of r2_lin over the k folds (ddof 1)",
    "r2_lin_half_rows": "r2_lin again, each fold's map fitted on (k-1)//2 of its k-1 training folds (half the rows for "
    "odd k): close to r2_lin when the rows suffice for the width, clearly below it when more rows would still raise "
    "r2_lin (a convergence check from the same moments; NaN when those folds hold too few rows)",
    "first_position_share": "share of the block's output variance (about the mean of every row) at the first "
    "captured position of each window: position 0, where the attention sink sits, unless --skip-first",
    "r2_lin_after_first": "r2_lin with the first captured position of each window left out of both fit and "
    "evaluation (NaN when too few rows remain)",
    "r2_lin_after_first_std": "its standard deviation over the k folds: large where a few rows carry most of what "
    "is left of the block's output variance, so that the fold which draws them decides the number",
    "top_rows_share": "share of the block's output variance (about the mean of every row) carried by its largest "
    "0.1 % of rows (rows ranked by their distance from that mean; NaN where one pass could not single them out)",
    "top_rows_share_after_first": "the same over the rows after the first captured position of each window: near 1 "
    "where a handful of rows decide r2_lin_after_first",
    "r2_feature_median": "median over output features of each feature's own held-out R²",
    "effective_rank_out": "participation ratio of the output covariance: how many directions carry the output (NaN "
    "unless the capture summed the whole output covariance: --extras output-covariance)",
    "effective_rank_map": "participation ratio of the fitted map's predictions WᵀCxxW",
    "input_condition": "condition number λmax/λmin of the input covariance over its non-null directions",
    "input_rms": "root mean square of the inputs about their mean, √(tr Σ / d_in) with Σ the input covariance",
    "effective_rank_in": "participation ratio of the input covariance: d_in for isotropic inputs, 1 for one direction",
    "outlier_ratio": "largest per-dimension input variance over the median one: outlier dimensions make it large",
    "null_dims": "input directions dropped as numerically null (LayerNorm-fed inputs have at least one)",
    "n_train": "rows each fold's fit was trained on: all rows less the held-out fold (mean over folds)",
    "n_test": "held-out rows per fold (the mean over folds)",
    "d_in": "input width of the block",
    "d_out": "output width of the block",
    "r2_lin_folds": "the held-out R²_lin of each fold, fold 0 first, as a list (r2_lin is their mean)",
    "r2_lin_after_first_folds": "the same for r2_lin_after_first (an empty list where it is NaN)",
    **{
        column: f"{meaning} (NaN unless asked for, --extras scores, and where the residual stream is not seen)"
        for column, meaning in SCORES.items()
    },
}
"""What each column of :func:`linrec.core.fit.report_table` means, in the table's order."""
