"""Zero-shot task accuracy through lm-evaluation-harness, on a model linrec has already loaded.

:func:`harness_scores` runs ``lm_eval.simple_evaluate`` (0.4.13) on the model object and its tokenizer through
lm_eval's own ``HFLM`` (causal backend, the model's context as its longest input), every seed set to ``seed``,
without lm_eval's request cache, sample logs or result files: each task's accuracy (``acc``), its length-normalised
accuracy (``acc_norm``) where the task defines one, and their standard errors, the numbers lm_eval's own run of the
same weights reports (tests/interventions/tasks/test_harness.py checks both, and ``acc`` by hand). A group (``mmlu``)
is reported as lm_eval aggregates it; a tag, or a group without an aggregate, as its tasks.

Before the model runs, every task is looked up in lm_eval's task index and where its data comes from is read from
its YAML: an unknown name fails with the registered names closest to it; a task whose data is a dataset on the
Hugging Face hub fails where the hub cannot be used (``HF_DATASETS_OFFLINE``/``HF_HUB_OFFLINE``, or no answer) and
the dataset is not in the local datasets cache, and so does a task whose local data files do not exist, all such
tasks in one error. A task's data is then given as local files, in a directory of task YAMLs (``task_dir``,
``--task-dir``) read with lm_eval's own: a task of one's own as :data:`LOCAL_TASK_YAML` shows, a built-in task by a
YAML that includes the built-in one (the error names it) and says only where the data lies::

    include: /path/to/site-packages/lm_eval/tasks/piqa/piqa.yaml
    task: piqa
    dataset_path: json
    dataset_kwargs:
      data_files:
        train: /data/piqa/train.jsonl
        validation: /data/piqa/valid.jsonl

Its split names are the built-in task's (``training_split``, ``validation_split``, ``test_split``), and each item
has the hub dataset's fields. Data read by a task's own Python code (a ``class`` or ``custom_dataset`` task) is not
checked beforehand.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import difflib
import functools
import glob
import logging
import numbers
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lm_eval  # type: ignore[import-untyped]
import pandas as pd
from datasets import config as datasets_config
from datasets import naming, packaged_modules
from lm_eval.api.model import CacheHook  # type: ignore[import-untyped]
from lm_eval.config.group import GroupConfig  # type: ignore[import-untyped]
from lm_eval.evaluator import simple_evaluate  # type: ignore[import-untyped]
from lm_eval.models.huggingface import HFLM  # type: ignore[import-untyped]
from lm_eval.tasks import TaskManager  # type: ignore[import-untyped]
from lm_eval.tasks._index import Kind  # type: ignore[import-untyped]
from torch import nn
from transformers import PreTrainedTokenizerBase

from linrec.core.capture import require_eval
from linrec.errors import LinrecError, whole
from linrec.hub import datasets_offline, hub_reachable, use_hub_timeouts
from linrec.interventions.tasks.suites import LINREC_TASKS, parse_tasks
from linrec.models.arch import CAUSAL
from linrec.models.loading import max_context
from linrec.progress import progress_bar

LOCAL_TASK_YAML = """\
task: my_task
dataset_path: json
dataset_kwargs:
  data_files:
    test: /data/my_task.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_choice: "{{choices}}"
doc_to_target: label
metric_list:
  - {metric: acc, aggregation: mean, higher_is_better: true}
  - {metric: acc_norm, aggregation: mean, higher_is_better: true}
metadata: {version: 1.0}
"""
"""A multiple-choice task of one's own, read from local JSON lines (one ``{"question": ..., "choices": [...],
"label": 0}`` a line): a YAML file in ``task_dir``. Its version is recorded with its scores."""

_Leaf = tuple[str, dict[str, Any]]
"""A task as lm_eval will build it: its name and its config (:func:`_leaves`)."""

_GROUP_FIELDS = {field.name for field in dataclasses.fields(GroupConfig)}
"""A group YAML's own keys; its other keys are settings of its tasks (as lm_eval's task factory reads it)."""


@dataclass(frozen=True)
class MetricScore:
    """One metric of a task as lm_eval reports it: ``name`` (``acc``; ``metric,filter`` where a filter other than
    ``none`` made it), its value and its standard error (None where lm_eval gives none, e.g. for one item)."""

    name: str
    value: float
    stderr: float | None


@dataclass(frozen=True)
class TaskScore:
    """A task's (or group's) scores: its version as lm_eval's ``results["versions"]`` gives it, the number of items
    scored, and each metric."""

    task: str
    version: str
    n: int
    metrics: tuple[MetricScore, ...]


@dataclass(frozen=True)
class HarnessResult:
    """The scores of one :func:`harness_scores` run, in the order the tasks were asked for, with the harness's version
    and the settings that produced them."""

    tasks: tuple[TaskScore, ...]
    lm_eval: str
    num_fewshot: int
    limit: int | None
    batch_size: int
    seed: int

    def record(self) -> dict[str, Any]:
        """The scores as a JSON-able dict: the harness and its version, the settings, and per task its version, n and
        each metric's value and stderr."""
        return {
            "harness": "lm-evaluation-harness",
            "lm_eval": self.lm_eval,
            "settings": {
                "num_fewshot": self.num_fewshot,
                "limit": self.limit,
                "batch_size": self.batch_size,
                "seed": self.seed,
            },  # fmt: skip
            "tasks": [
                {
                    "task": t.task,
                    "version": t.version,
                    "n": t.n,
                    "metrics": {m.name: {"value": m.value, "stderr": m.stderr} for m in t.metrics},
                }  # fmt: skip
                for t in self.tasks
            ],
        }

    def table(self) -> pd.DataFrame:
        """One row per task and metric: ``task, metric, value, stderr, n, version`` (stderr NaN where there is none)."""
        rows = [
            {"task": t.task, "metric": m.name, "value": m.value, "stderr": m.stderr, "n": t.n, "version": t.version}
            for t in self.tasks
            for m in t.metrics
        ]
        columns = ["task", "metric", "value", "stderr", "n", "version"]
        return pd.DataFrame(rows, columns=columns).astype({"value": float, "stderr": float})


class _Advance(CacheHook):
    """lm_eval's per-answer hook (that of its request cache, unused here), advancing a progress bar instead."""

    def __init__(self, bar: Any) -> None:
        super().__init__(None)
        self.bar = bar

    def add_partial(self, attr: str, req: Any, res: Any) -> None:
        self.bar.update(1)


class _LoadedLM(HFLM):
    """lm_eval's ``HFLM`` on a model object, its requests counted on one :func:`linrec.progress.progress_bar` (none
    where ``progress`` is False) in place of lm_eval's own bars."""

    def __init__(self, *args: Any, progress: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.progress = progress

    def _counted(self, run: Callable[..., list[Any]], requests: list[Any]) -> list[Any]:
        bar = progress_bar(total=len(requests), desc="task requests", unit="request", disable=not self.progress)
        with bar:
            self.set_cache_hook(_Advance(bar))
            return run(requests, disable_tqdm=True)

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        return self._counted(super().loglikelihood, requests)

    def _loglikelihood_tokens(self, requests: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        """lm_eval's scoring, after one check of every request (its only check is a bare assertion, per batch, once
        the model has begun): the harness scores a continuation whole within the model's context, or not at all."""
        over = [continuation for _, _, continuation in requests if len(continuation) > self.max_length]
        if over:
            raise LinrecError(
                f"{len(over)} of {len(requests)} answers of these tasks take more tokens than the model's context "
                f"of {self.max_length} (the longest {max(map(len, over))}): lm-evaluation-harness scores an answer "
                "only whole; shorten those answers or score a model with a longer context"
            )
        return super()._loglikelihood_tokens(requests, *args, **kwargs)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        return self._counted(super().loglikelihood_rolling, requests)

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[Any]:
        return self._counted(super().generate_until, requests)


@dataclass(frozen=True)
class CheckedTasks:
    """Task names found in lm_eval's index with data that can be read here (:func:`check_tasks`): what
    :func:`harness_scores` runs, its index read once however many times it runs (10 to 20 s a reading)."""

    names: tuple[str, ...]
    task_dir: str | Path | None
    manager: Any
    leaves: Mapping[str, list[_Leaf]]


def check_tasks(tasks: str | Sequence[str], task_dir: str | Path | None = None) -> CheckedTasks:
    """``tasks`` (names or suites, :func:`linrec.interventions.tasks.suites.parse_tasks`) looked up in lm_eval's task
    index and ``task_dir``'s YAMLs, with where their data comes from checked (the module docstring); no model needed,
    so a command checks them before it loads one."""
    names = parse_tasks(tasks)
    ours = [name for name in names if name in LINREC_TASKS]
    if ours:
        raise LinrecError(
            f"{', '.join(ours)}: scored by linrec itself, not by lm-evaluation-harness; give harness_scores the "
            "names that linrec.interventions.tasks.suites.harness_tasks keeps"
        )
    if task_dir is not None and not Path(task_dir).is_dir():
        raise LinrecError(f"task_dir {str(task_dir)!r} is not a directory; give the directory of your task YAMLs")
    manager = _task_manager(names, task_dir)
    leaves = _resolve(manager.task_index, names, task_dir)
    _check_data(leaves, manager.task_index)
    return CheckedTasks(names, task_dir, manager, leaves)


def harness_scores(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    tasks: str | Sequence[str] | CheckedTasks,
    *,
    task_dir: str | Path | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    num_fewshot: int = 0,
    seed: int = 0,
    progress: bool = False,
) -> HarnessResult:
    """lm-evaluation-harness's scores of ``model`` (a causal LM in eval mode) on ``tasks``: names or suites as
    :func:`linrec.interventions.tasks.suites.parse_tasks` reads them, found in lm_eval's task index and in the task
    YAMLs of ``task_dir`` (which take precedence); the first ``limit`` items of each (all when None), ``num_fewshot``
    examples in each prompt (but where a task's YAML sets 0, as lm_eval has it), ``batch_size`` requests a forward
    pass, every seed set to ``seed``. ``progress``: one bar over the model's requests in place of lm_eval's (its bar
    over the documents as it builds them, and that of ``datasets`` as it first reads a dataset, are theirs).

    Everything is checked before the model runs (see the module docstring): the settings, the model, every task's
    name and where its data comes from. lm_eval's ``HFLM`` gets a copy of the tokenizer (it may set a pad token on
    it) and the model as it is, on its own device (it calls ``model.tie_weights()``, which changes nothing where the
    embeddings are tied as the config says); a tokenizer without BOS or EOS gives it its pad token to score a
    continuation without context after (HFLM fails on such a tokenizer)."""
    _check_settings(model, tokenizer, limit, batch_size, num_fewshot, seed)
    checked = tasks if isinstance(tasks, CheckedTasks) else check_tasks(tasks, task_dir)
    use_hub_timeouts()  # a hub dataset's requests fail in seconds rather than hang
    with _quiet_harness():
        lm = _LoadedLM(
            pretrained=model, tokenizer=copy.deepcopy(tokenizer), backend="causal", batch_size=batch_size,
            max_length=max_context(model), prefix_token_id=_prefix_token(tokenizer), progress=progress,
        )  # fmt: skip
        results = simple_evaluate(
            model=lm, tasks=list(checked.names), task_manager=checked.manager, num_fewshot=num_fewshot, limit=limit,
            use_cache=None, cache_requests=False, log_samples=False, write_out=False,
            random_seed=seed, numpy_random_seed=seed, torch_random_seed=seed, fewshot_random_seed=seed,
        )  # fmt: skip
    return HarnessResult(
        tasks=_scores(results, checked.names, checked.leaves), lm_eval=lm_eval.__version__, num_fewshot=num_fewshot,
        limit=limit, batch_size=batch_size, seed=seed,
    )  # fmt: skip


@contextlib.contextmanager
def _quiet_harness() -> Iterator[None]:
    """lm_eval's log at errors only while it runs: its notes (a model passed as an object, each task's few-shot
    default overwritten) are about how linrec calls it, nothing a user can act on; and no bars but linrec's own over
    the requests: none for the harness's building of each task's requests, none for datasets reading a task's
    files (an executed chapter kept them as stray lines of bars)."""
    import datasets
    import lm_eval.api.task  # type: ignore[import-untyped]

    logger = logging.getLogger("lm_eval")
    level, bars, build = logger.level, datasets.is_progress_bar_enabled(), lm_eval.api.task.tqdm
    logger.setLevel(logging.ERROR)
    datasets.disable_progress_bars()
    lm_eval.api.task.tqdm = functools.partial(build, disable=True)
    try:
        yield
    finally:
        logger.setLevel(level)
        lm_eval.api.task.tqdm = build
        if bars:
            datasets.enable_progress_bars()


def _check_settings(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    limit: int | None,
    batch_size: int,
    num_fewshot: int,
    seed: int,
) -> None:
    if limit is not None:
        whole("limit", limit, 1)
    whole("batch_size", batch_size, 1)
    whole("num_fewshot", num_fewshot, 0)
    whole("seed", seed, 0)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in CAUSAL:
        raise LinrecError(
            f"task scores need a causal language model with its head; this model's type is {model_type!r} "
            f"(the causal types: {', '.join(CAUSAL)})"
        )
    require_eval(model, "the task scores")
    if all(token is None for token in (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id)):
        raise LinrecError(
            "the tokenizer has no BOS, EOS or pad token, one of which lm-evaluation-harness puts before a "
            "continuation scored without a context; give it one (tokenizer.add_special_tokens)"
        )


def _prefix_token(tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The token HFLM scores a continuation without context after: None (its own choice, BOS else EOS) where the
    tokenizer has either, else the pad token (HFLM fails without one)."""
    if tokenizer.bos_token_id is not None or tokenizer.eos_token_id is not None:
        return None
    return tokenizer.pad_token_id


def _task_manager(names: tuple[str, ...], task_dir: str | Path | None) -> Any:
    """lm_eval's task index: of ``task_dir``'s YAMLs alone where each name and each of its tasks is found there
    (lm_eval's own 14,000 YAML files take 10 to 20 s to index), else of lm_eval's tasks and ``task_dir``'s, which take
    precedence."""
    if task_dir is not None:
        local = TaskManager(include_path=str(task_dir), include_defaults=False)
        index = local.task_index
        if all(name in index and all(task in index for task, _ in _leaves(index, name, {})) for name in names):
            return local
    return TaskManager(include_path=None if task_dir is None else str(task_dir))


def _resolve(index: Mapping[str, Any], names: tuple[str, ...], task_dir: str | Path | None) -> dict[str, list[_Leaf]]:
    """Each name's tasks (:func:`_leaves`); a LinrecError naming every unknown name and the registered names closest
    to it, or every task that two of the names share."""
    unknown = [name for name in names if name not in index]
    if unknown:
        where = f"lm-evaluation-harness {lm_eval.__version__}" + (f" or {task_dir}" if task_dir is not None else "")
        raise LinrecError(
            f"unknown task {', '.join(_guess(name, index) for name in unknown)}: no task, group or tag of {where} "
            "has that name. A task of your own is a YAML file in task_dir (--task-dir), one a task (a file lm_eval "
            f"cannot read is skipped), e.g.\n{LOCAL_TASK_YAML}"
        )
    leaves = {name: _leaves(index, name, {}) for name in names}
    asked = [(task, name) for name, found in leaves.items() for task in dict.fromkeys(t for t, _ in found)]
    twice = {task: [n for t, n in asked if t == task] for task, _ in asked if sum(t == task for t, _ in asked) > 1}
    if twice:
        raise LinrecError(
            "tasks asked for more than once, which lm-evaluation-harness refuses: "
            + "; ".join(f"{task} (in {', '.join(where)})" for task, where in twice.items())
            + "; ask for each task once, in a separate run for a group that shares it"
        )
    return leaves


def _guess(name: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, known)
    return f"'{name}'" + (f" (did you mean {', '.join(close)}?)" if close else "")


def _leaves(index: Mapping[str, Any], name: str, overrides: Mapping[str, Any]) -> list[_Leaf]:
    """The tasks ``name`` stands for (itself, a tag's tasks, a group's members at any depth), each with its config as
    lm_eval will build it: its YAML, includes resolved and no code imported, under the settings of the groups above
    it (``overrides``). A member the index lacks is built from those settings alone, as lm_eval builds it."""
    entry = index.get(name)
    if entry is None:
        return [(name, dict(overrides))]
    if entry.kind is Kind.TAG:
        return [leaf for task in sorted(entry.tags) for leaf in _leaves(index, task, overrides)]
    if entry.kind is Kind.GROUP:
        return _members(index, name, entry.cfg, overrides)
    return [(name, {**(entry.cfg or {}), **overrides})]


def _members(index: Mapping[str, Any], group: str, cfg: Mapping[str, Any], overrides: Mapping[str, Any]) -> list[_Leaf]:
    """The tasks of a group's ``task:`` list (names, or dicts of a task or group with its settings), as lm_eval's task
    factory builds them; a member the index lacks is named ``group::member``."""
    settings = {**{k: v for k, v in cfg.items() if k not in _GROUP_FIELDS}, **overrides}
    found = []
    for member in cfg.get("task", []):
        item = {"task": member} if isinstance(member, str) else dict(member)
        if "group" in item:
            sub = item.pop("group")
            inline = sub not in index
            found += (
                _members(index, f"{group}::{sub}", item, settings) if inline else _leaves(index, sub, settings | item)
            )
        else:
            task = item.pop("task")
            found += _leaves(index, task if task in index else f"{group}::{task}", settings | item)
    return found


def _check_data(leaves: Mapping[str, list[_Leaf]], index: Mapping[str, Any]) -> None:
    """A LinrecError naming every asked-for task whose data cannot be read here and saying how to give it, else
    nothing; the hub is asked whether it answers only where a task needs it."""
    sources = {
        name: [(task, found) for task, cfg in tasks if (found := _source(cfg))] for name, tasks in leaves.items()
    }
    hub = any(kind == "hub" for found in sources.values() for _, (kind, _) in found)
    reason = _hub_unusable() if hub else None
    problems = {
        name: [(task, what) for task, (kind, what) in found if kind == "missing" or reason]
        for name, found in sources.items()
    }
    lines = [_problem(name, found, len(leaves[name]), index) for name, found in problems.items() if found]
    if not lines:
        return
    why = f": {reason}, and the local datasets cache ({datasets_config.HF_DATASETS_CACHE}) lacks them" if reason else ""
    again = "Or run once where the hub can be reached: the datasets cache then keeps the data.\n" if reason else ""
    raise LinrecError(
        f"the data of {len(lines)} task(s) cannot be read here{why}:\n" + "\n".join(lines) + "\nGive a task its "
        "data as local files, in a directory of task YAMLs (task_dir, --task-dir), read by `dataset_path: json` and "
        "`dataset_kwargs: {data_files: {<split>: <file>}}`, with absolute paths (a relative one is read from the "
        f"current directory, {os.getcwd()}): a built-in task by a YAML that includes its own (`include: <its YAML>`) "
        f"and sets those two (linrec.interventions.tasks.harness shows one), a task of your own e.g.\n"
        f"{LOCAL_TASK_YAML}{again}"
    )


def _source(cfg: Mapping[str, Any]) -> tuple[str, str] | None:
    """What keeps a task's data from being read without the hub: ``("missing", files)`` for local data files that do
    not exist, ``("hub", dataset)`` for data on the hub that the local datasets cache lacks; None for neither, and
    for data the task's own code reads."""
    path = cfg.get("dataset_path")
    if "class" in cfg or cfg.get("custom_dataset") or not path:
        return None
    files = _data_files(cfg)
    absent = [f for f in files if "://" not in f and not glob.glob(f)]
    if absent:
        return "missing", f"no data file {', '.join(absent)}"
    remote = any("://" in f for f in files) or not (
        path in packaged_modules._PACKAGED_DATASETS_MODULES or Path(path).is_dir()
    )
    if remote and not _cached(path, cfg.get("dataset_name")):
        return "hub", f"data on the Hugging Face hub ({path})"
    return None


def _problem(name: str, found: list[tuple[str, str]], total: int, index: Mapping[str, Any]) -> str:
    """The error's line for asked-for ``name``: what is wrong with the data of its tasks (``found``: task, what), of
    ``total`` tasks, and where the (first such) task's YAML lies."""
    what = "; ".join(dict.fromkeys(problem for _, problem in found))
    first = found[0][0]
    yaml = f"; YAML: {index[first].yaml_path}" if first in index and index[first].yaml_path else ""
    if first == name:
        return f"- {name}: {what}{yaml}"
    tasks = first if len(found) == 1 else f"{first} to {found[-1][0]}"
    return f"- {name}: {len(found)} of its {total} tasks ({tasks}): {what}{yaml.replace('YAML', f'YAML of {first}')}"


def _data_files(cfg: Mapping[str, Any]) -> list[str]:
    """The data files a task's ``dataset_kwargs`` name (a path, a list, or lists by split), as given."""
    files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if files is None:
        return []
    values = [files] if isinstance(files, str) else list(files.values() if isinstance(files, Mapping) else files)
    return [str(f) for value in values for f in ([value] if isinstance(value, str) else value)]


def _cached(path: str, config: str | None) -> bool:
    """Whether the local datasets cache holds hub dataset ``path`` (config ``config``, any when None), which
    ``datasets`` then reads without the hub: its folders ``<namespace>___<name>/<config>/<version>/<hash>``."""
    if path in packaged_modules._PACKAGED_DATASETS_MODULES:
        return False  # read from remote data files, not a hub dataset's own folder
    *namespace, dataset = path.split("/")
    root = Path(datasets_config.HF_DATASETS_CACHE) / "___".join([*namespace, naming.camelcase_to_snakecase(dataset)])
    return any(found.is_dir() for found in root.glob(f"{config or '*'}/*/*"))


def _hub_unusable() -> str | None:
    """Why the hub cannot give a dataset (None where it can)."""
    if datasets_offline():
        return "HF_DATASETS_OFFLINE / HF_HUB_OFFLINE forbid the hub"
    return None if hub_reachable() else "the hub cannot be reached"


def _scores(
    results: Mapping[str, Any], names: tuple[str, ...], leaves: Mapping[str, list[_Leaf]]
) -> tuple[TaskScore, ...]:
    """Each name's scores: its own where lm_eval reports metrics for it (a task, a group it aggregates), else its
    tasks' (a tag, a group without an aggregate), each once."""
    table = results["results"]
    shown = [
        task for name in names for task in ([name] if _metrics(table.get(name, {})) else [t for t, _ in leaves[name]])
    ]
    return tuple(
        TaskScore(
            task=t, version=str(results["versions"].get(t)), n=int(table[t]["sample_len"]), metrics=_metrics(table[t])
        )
        for t in dict.fromkeys(shown)
        if t in table
    )


def _metrics(row: Mapping[str, Any]) -> tuple[MetricScore, ...]:
    """The metrics of one row of lm_eval's ``results``: keys ``metric,filter`` and their ``metric_stderr,filter``."""
    found = []
    for key, value in row.items():
        metric, comma, kind = key.partition(",")
        if comma and not metric.endswith("_stderr") and isinstance(value, numbers.Real):
            stderr = row.get(f"{metric}_stderr,{kind}")
            error = float(stderr) if isinstance(stderr, numbers.Real) else None  # "N/A" where none
            found.append(MetricScore(metric if kind == "none" else key, float(value), error))
    return tuple(found)
