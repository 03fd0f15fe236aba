"""Two sets of executed chapters compared to the last printed digit: what "a restructuring changes no result" means.

``python book/build.py compare BEFORE AFTER`` reads the executed notebooks (``NN_topic.ipynb``) of two directories,
copies of ``book/chapters`` taken before and after a change, and compares the text each code cell printed, cell by
cell: its stdout, its ``text/plain`` and the text of its ``text/html`` tables (and its figures' PNG bytes with
``images``). What may differ between two runs of the same code is left out first: lines that say how long something
took, progress bars, memory addresses, and absolute paths (replaced by ``<path>``). A timing printed as a bare number
in a table cannot be told from a result, so each differing stretch is shown with the line before it.
"""

from __future__ import annotations

import difflib
import hashlib
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bookbuild.layout import BookError

VOLATILE = (
    r"\b\d+(\.\d+)?\s*(s|ms|min|sec|seconds|minutes)\b",  # durations
    r"it/s|s/it|tok/s|step/s|s/step",  # rates of progress bars
    r"\d+%\|",  # progress bars
    r"0x[0-9a-f]{6,}",  # memory addresses
    r"wall time|took \d|elapsed|wall_s=",
)
"""Lines matching any of these (case-insensitive) are left out of the comparison."""

_PATH = re.compile(r"(?<![\w.])(/[\w.+-]+)+/?")
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Difference:
    """A notebook whose outputs differ: each differing stretch, a unified diff of a few lines."""

    notebook: str
    stretches: tuple[str, ...]


def cell_texts(path: Path, images: bool = False) -> list[str]:
    """What each code cell of the executed notebook ``path`` printed, one string per code cell."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError) as err:
        raise BookError(f"{path} cannot be read as an executed notebook ({err})") from None
    texts = []
    for cell in (c for c in cells if c.get("cell_type") == "code"):
        parts = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                parts.append("".join(output["text"]))
            if "text/html" in data:
                parts.append(html.unescape(_TAG.sub(" ", "".join(data["text/html"]))))
            if "text/plain" in data:
                parts.append("".join(data["text/plain"]))
            if images and "image/png" in data:
                parts.append("png " + hashlib.sha256("".join(data["image/png"]).encode()).hexdigest()[:16])
            if output.get("output_type") == "error":
                parts.append(f"ERROR {output.get('ename')}: {output.get('evalue')}")
        texts.append("\n".join(parts))
    return texts


def normalised(text: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """The lines of ``text`` that say something about results: volatile lines out, paths and spacing evened."""
    lines = []
    for line in text.splitlines():
        if any(re.search(pattern, line, re.IGNORECASE) for pattern in (*VOLATILE, *ignore)):
            continue
        line = re.sub(r"\s+", " ", _PATH.sub("<path>", line)).strip()
        if line:
            lines.append(line)
    return lines


def compare(before: Path, after: Path, ignore: tuple[str, ...] = (), images: bool = False) -> list[Difference]:
    """Every notebook in both directories whose outputs differ (empty when all match); a notebook in one directory
    only is a difference too, and two directories with no notebook in common are a BookError."""
    names = {p.name for p in before.glob("*.ipynb")} | {p.name for p in after.glob("*.ipynb")}
    common = sorted(n for n in names if (before / n).exists() and (after / n).exists())
    if not common:
        raise BookError(f"no executed notebook is in both {before} and {after}: give two copies of book/chapters")
    differences = [Difference(n, (f"only in {before if (before / n).exists() else after}",)) for n in
                   sorted(names - set(common))]  # fmt: skip
    for name in common:
        old = [line for text in cell_texts(before / name, images) for line in normalised(text, ignore)]
        new = [line for text in cell_texts(after / name, images) for line in normalised(text, ignore)]
        if old != new:
            diff = list(difflib.unified_diff(old, new, "before", "after", n=1, lineterm=""))[2:]
            stretches = "\n".join(diff).split("\n@@")
            differences.append(Difference(name, tuple(s.strip() for s in stretches if s.strip())))
    return differences


def report(differences: list[Difference], shown: int = 5) -> str:
    """The differences as a reader checks them: each notebook, then its first ``shown`` stretches."""
    lines = []
    for d in differences:
        lines.append(f"{d.notebook}: {len(d.stretches)} differing stretch{'es' * (len(d.stretches) != 1)}")
        lines += ["  " + s.replace("\n", "\n  ") for s in d.stretches[:shown]]
    return "\n".join(lines)
