"""The last run of chapter 12's walk with the tasks scored at every step, kept in the package: a build that cannot
afford that run (the offline one: about half an hour more on two cores) shows its figures, labelled with when, where
and how it ran, beside its own.

:func:`record_walk` writes the studies of such a run (:func:`linrec.experiment.tasks.task_study`'s tables, each
model's) to :data:`RECORD` with its date, machine, profile, command, commit and library versions, and a sha256 of
all of it; :func:`recorded_walk` reads it back (None where no run is recorded) and refuses a file that does not
match its digest.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from linrec.errors import LinrecError
from linrec.files import write_atomically
from linrec.threads import usable_cores
from linrec.versions import versions

RECORD = Path(__file__).with_name("tasks_walk.json")
"""Where the package keeps the recorded run (package data)."""

TABLES = ("walk", "changes", "scores", "run")
"""The tables of each study a record keeps, each the models' rows together."""

FIELDS = ("date", "machine", "profile", "command", "commit", "versions")
"""What a record says of its run, beside its tables."""


@dataclass(frozen=True)
class RecordedWalk:
    """A recorded run: :data:`FIELDS` and the :data:`TABLES`, by name."""

    date: str
    machine: str
    profile: str
    command: str
    commit: str | None
    versions: dict[str, str]
    tables: dict[str, pd.DataFrame]

    def label(self) -> str:
        """The run in one sentence, as the chapter names it above its figures."""
        at = f", commit {self.commit}" if self.commit else ""
        return f"the run of {self.date} on {self.machine} (`{self.profile}` profile{at}): `{self.command}`"


def record_command(profile: str) -> str:
    """The command that runs chapter 12 under ``profile`` with the tasks at every step and records the run."""
    chapter = f"python book/build.py execute --profile {profile} --only 12_tasks"
    return f"{chapter} --param TASK_WALK=true --param RECORD_WALK=true"


def check_recording(record: bool, walk: bool) -> None:
    """A LinrecError, before any work, where a run is to be recorded (``record``) without the tasks scored at every
    step (``walk``): a record keeps only such a walk."""
    if record and not walk:
        raise LinrecError("RECORD_WALK = True keeps a walk scored at every step; set TASK_WALK = True with it")


def machine() -> str:
    """This machine as a record names it: its CPU cores and architecture, and its GPU where torch sees one."""
    import torch

    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ", no GPU"
    return f"{usable_cores()} CPU cores ({platform.machine()}){gpu}"


def commit() -> str | None:
    """The commit of the checkout this package is imported from (None outside one, or without git)."""
    try:
        done = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def record_walk(
    studies: Mapping[str, Mapping[str, pd.DataFrame]], profile: str, command: str, path: Path = RECORD
) -> Path:
    """Write ``studies`` (model -> :func:`~linrec.experiment.tasks.task_study`'s tables) run under ``profile`` by
    ``command`` to ``path``, with this run's date, machine, commit and versions; a LinrecError where no study scored
    the tasks along the walk (nothing a build would not show itself)."""
    if not any(len(study["changes"]) for study in studies.values()):
        check_recording(True, False)
    body = {
        "date": dt.date.today().isoformat(), "machine": machine(), "profile": profile, "command": command,
        "commit": commit(), "versions": versions(("torch", "transformers", "lm_eval")),
        "tables": {name: pd.concat([s[name] for s in studies.values()], ignore_index=True)
                   .to_dict(orient="split", index=False) for name in TABLES},
    }  # fmt: skip
    text = json.dumps({**body, "sha256": _digest(body)}, indent=1)
    write_atomically(Path(path), lambda f: f.write(text))
    return Path(path)


def recorded_walk(path: Path = RECORD) -> RecordedWalk | None:
    """The run recorded at ``path`` (None where none is); a LinrecError where the file is not one
    :func:`record_walk` wrote, or was changed since."""
    path = Path(path)
    if not path.exists():
        return None
    damaged = f"{path} is not a recorded walk as record_walk writes it"
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        body = {key: stored[key] for key in (*FIELDS, "tables")}
        tables = {name: pd.DataFrame(**body["tables"][name]) for name in TABLES}
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise LinrecError(f"{damaged} ({err}); record it again (chapter 12 with RECORD_WALK = True)") from err
    if stored.get("sha256") != _digest(body):
        raise LinrecError(f"{damaged}: its contents do not match its sha256; record it again (chapter 12 with "
                          "RECORD_WALK = True)")  # fmt: skip
    return RecordedWalk(**{key: body[key] for key in FIELDS}, tables=tables)


def _digest(body: Mapping) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
