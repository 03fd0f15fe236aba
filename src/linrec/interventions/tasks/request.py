"""What ``linrec evaluate`` and ``linrec replace --tasks`` are asked to score, read and checked before torch loads.

A request is a task list (:func:`linrec.interventions.tasks.suites.parse_tasks`) and the settings of the three kinds
of score it may hold: lm-evaluation-harness tasks (their local task directory, items per task, batch size), HumanEval
(tokens per completion, seconds per test) and the pruning papers' perplexity (a local text in place of WikiText-2's,
the window). Whether the harness knows a task and can read its data is checked later, by
:func:`linrec.interventions.tasks.evaluate.prepare`, which imports the harness (seconds); everything here is checked
in a fraction of one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from linrec.errors import LinrecError, whole
from linrec.interventions.tasks.suites import HUMANEVAL, PRUNING_PPL, harness_tasks, parse_tasks


@dataclass(frozen=True)
class TaskRequest:
    """The tasks to score and how (the module docstring); :meth:`of` reads and checks one."""

    tasks: tuple[str, ...]
    task_dir: Path | None = None
    limit: int | None = None
    batch_size: int = 8
    max_new_tokens: int = 512
    timeout: float = 3.0
    ppl_text: Path | None = None
    ppl_seq_len: int | None = None

    @classmethod
    def of(
        cls,
        tasks: str | Sequence[str],
        *,
        task_dir: str | Path | None = None,
        limit: int | None = None,
        batch_size: int = 8,
        max_new_tokens: int = 512,
        timeout: float = 3.0,
        ppl_text: str | Path | None = None,
        ppl_seq_len: int | None = None,
    ) -> TaskRequest:
        """A request, every setting checked (a LinrecError naming the first one that cannot work)."""
        names = parse_tasks(tasks)
        counts = {"the limit": (limit, 1), "the batch size": (batch_size, 1), "the ppl window": (ppl_seq_len, 2),
                  "max new tokens": (max_new_tokens, 1)}  # fmt: skip
        for name, (value, low) in counts.items():
            if value is not None:
                whole(name, value, low)
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise LinrecError(f"the HumanEval test timeout must be a number of seconds above 0; got {timeout!r}")
        if task_dir is not None and not Path(task_dir).is_dir():
            raise LinrecError(f"--task-dir {task_dir} is not a directory; give the directory of your task YAMLs")
        if task_dir is not None and not harness_tasks(names):
            raise LinrecError(f"--task-dir is read by lm-evaluation-harness tasks, and none is asked for ({tasks})")
        if ppl_text is not None:
            if PRUNING_PPL not in names:
                raise LinrecError(f"--ppl-text is scored by the task {PRUNING_PPL}; add it to --tasks")
            try:
                Path(ppl_text).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise LinrecError(f"cannot read --ppl-text {ppl_text} as UTF-8 text: {err}") from err
        return cls(
            names,
            None if task_dir is None else Path(task_dir),
            limit,
            batch_size,
            max_new_tokens,
            float(timeout),
            None if ppl_text is None else Path(ppl_text),
            ppl_seq_len,
        )

    @property
    def harness(self) -> tuple[str, ...]:
        """The tasks lm-evaluation-harness scores."""
        return harness_tasks(self.tasks)

    @property
    def humaneval(self) -> bool:
        """Whether HumanEval is asked for."""
        return HUMANEVAL in self.tasks

    @property
    def pruning_ppl(self) -> bool:
        """Whether the pruning papers' perplexity is asked for."""
        return PRUNING_PPL in self.tasks
