"""Replacing FFN blocks for good, from a measurement to a smaller model that leaves linrec.

The path, in the order a practitioner meets it:

* the maps themselves, fitted from a block's moments alone: :mod:`linrec.core.replacements` (``affine``,
  ``lowrank:K``, ``mean``, ``zero``, ``first-apart:…``, ``remove``);
* putting one where an FFN was, for a scope or for good: :mod:`linrec.interventions.surgery`, and taking a whole
  decoder layer out: :mod:`linrec.interventions.removal`;
* :mod:`~linrec.interventions.replacement.replace`: choose blocks (given, or greedily under a perplexity budget),
  fit their maps and score each step on held-out text (``linrec.replace``);
* :mod:`~linrec.interventions.replacement.ablations`: every candidate swapped alone for each kind, side by side;
* :mod:`~linrec.interventions.replacement.directory`: the replacement directory on disk, saved and loaded back
  against its base model's hash (``linrec.load_replaced``);
* :mod:`~linrec.interventions.replacement.report`: that directory's ``report.md`` and figure;
* :mod:`~linrec.interventions.replacement.export`: the replaced model as a self-contained directory, a plain
  transformers checkpoint where its changes allow (``linrec export``).

Above this package, ``linrec replace`` and ``linrec export`` (:mod:`linrec.commands.replace`,
:mod:`linrec.commands.export`) are the command line, and :mod:`linrec.experiment.replaced` keeps a chapter's
replacement in the cache.
"""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
