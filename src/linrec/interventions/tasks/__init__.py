"""What a model can still do, beside its perplexity: zero-shot tasks through lm-evaluation-harness, HumanEval pass@1,
the pruning papers' WikiText-2 perplexity, and an offline multiple-choice task cut from a text
(:mod:`~linrec.interventions.tasks.evaluate` brings them together)."""

from linrec._lazy import lazy

__getattr__, __dir__ = lazy(__name__, globals())
