"""Build the book: notebooks/NN_topic.py -> notebooks/NN_topic.ipynb -> book/chapters/NN_topic.ipynb -> _build/html.

The percent-format ``.py`` files are the sources. ``sync`` turns each into a plain, unexecuted
notebook ``notebooks/NN_topic.ipynb`` (committed, so Colab can open it) with an install cell added
after the title. That cell installs linrec pinned to the last commit that changed its sources
(:data:`PINNED_SOURCES`), not to HEAD: a commit cannot name itself, whereas the source commit is
already known when the notebooks are regenerated, and a commit of only the regenerated notebooks
leaves it unchanged, so sync, commit, sync again is stable. Change sources, commit them, then run
``make notebooks`` and commit the notebooks; ``check-sync`` and ``check`` name a stale pin.
``execute`` runs those notebooks with papermill for one profile (with ``LINREC_PROGRESS=0``: no
progress bars in the built pages), adding an "Open in Colab" button built from ``repository.url``
in ``_config.yml``, and writes the executed chapters that ``_toc.yml`` lists; on the offline and
smoke profiles two chapters run at a time where there are two cores (``--jobs``). ``html`` renders them
with Jupyter Book, warnings as errors. ``check`` verifies the result; ``screenshot`` photographs a
page with headless Chromium.

    python book/build.py all --profile smoke        # sync + execute + html (what `make book` runs)
    python book/build.py check --screenshot _build/screenshots/01_method.png
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CHAPTERS = ROOT / "book" / "chapters"
HTML = ROOT / "_build" / "html"
KERNEL = "linrec-venv"
INSTALL_EXTRAS = "paper,notebook"
PINNED_SOURCES = ("src", "notebooks/*.py", "pyproject.toml")  # what the install cell's commit pins
_PIN = re.compile(r'^COMMIT = "([0-9a-f]{40})"$', re.MULTILINE)
COLAB = "https://colab.research.google.com"
NOTEBOOK_METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",  # Colab opens the notebook on a GPU runtime when one is available
    "colab": {"provenance": []},
}


class BookError(Exception):
    """A failed build step, with a message naming the notebook or page at fault."""


def sources() -> list[Path]:
    """The chapter sources, in chapter order (their NN_ prefix)."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def repository() -> tuple[str, str]:
    """(owner/name, branch) of the GitHub repository named once, in _config.yml."""
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    url = urlparse(repo["url"])
    slug = url.path.strip("/").removesuffix(".git")
    if url.netloc != "github.com" or slug.count("/") != 1:
        raise BookError(f"repository.url in _config.yml must be https://github.com/OWNER/NAME; got {repo['url']}")
    return slug, repo.get("branch", "main")


def colab_link(stem: str) -> str:
    """The Colab URL of the committed notebook notebooks/<stem>.ipynb."""
    slug, branch = repository()
    return f"{COLAB}/github/{slug}/blob/{branch}/notebooks/{stem}.ipynb"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", "") or err
        raise BookError(
            f"the install cells pin linrec to a commit, which needs git and this repository's history: "
            f"`git {' '.join(args)}` failed ({str(detail).strip()})"
        ) from None
    return done.stdout.rstrip("\n")


@functools.cache
def source_commit() -> str:
    """The last commit that changed linrec's sources (:data:`PINNED_SOURCES`): what the install cells pin."""
    if _git("rev-parse", "--is-shallow-repository") == "true":
        raise BookError("a shallow clone cannot tell which commit last changed the sources: git fetch --unshallow")
    commit = _git("log", "-1", "--format=%H", "--", *PINNED_SOURCES)
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise BookError(f"no commit touches {', '.join(PINNED_SOURCES)}: commit the sources first")
    return commit


def uncommitted_sources() -> list[str]:
    """Sources changed since the last commit (the install cells cannot pin those changes)."""
    return [line[3:] for line in _git("status", "--porcelain", "--", *PINNED_SOURCES).splitlines()]


def _install_cell() -> nbformat.NotebookNode:
    slug, _ = repository()
    spec = f"linrec[{INSTALL_EXTRAS}] @ git+https://github.com/{slug}@{{COMMIT}}"
    source = f"""\
# Installs linrec at the commit this notebook was built from (e.g. on Colab; an installed torch is kept),
# then checks that the linrec imported is this project's; a local checkout's linrec is used as it is.
import importlib.util, json, subprocess, sys
from importlib import metadata

COMMIT = "{source_commit()}"


def installed_commit():
    \"\"\"The commit a git install of linrec came from; "" for any other install; None when there is none.\"\"\"
    if importlib.util.find_spec("linrec") is None:
        return None
    try:
        url = json.loads(metadata.distribution("linrec").read_text("direct_url.json") or "{{}}")
    except metadata.PackageNotFoundError:  # a source tree on the path
        return ""
    return url.get("vcs_info", {{}}).get("commit_id", "")


if installed_commit() not in ("", COMMIT):
    spec = f"{spec}"
    print("pip install", spec)
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", spec], check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as err:
        print(err.stdout, err.stderr, sep="\\n")
        raise RuntimeError(f"pip could not install {{spec}}; its output is above") from None
    if "linrec" in sys.modules:
        raise RuntimeError("linrec changed after it was imported: Runtime → Restart session, then run again")
    importlib.invalidate_caches()
import linrec

if not hasattr(linrec, "measure") or installed_commit() not in ("", COMMIT):
    raise RuntimeError(
        f"the linrec at {{linrec.__file__}} is not this book's ({slug} at {{COMMIT[:12]}}): "
        "pip uninstall -y linrec, restart the runtime (Runtime → Restart session) and run again"
    )
print(f"linrec {{linrec.__version__}} from {{linrec.__file__}}")"""
    return nbformat.v4.new_code_cell(source, metadata={"tags": ["hide-input"]})


def pinned_commit(notebook: Path) -> str | None:
    """The commit the install cell of a written notebook pins (None: no notebook, or no pin in it)."""
    if not notebook.exists():
        return None
    cells = nbformat.read(notebook, as_version=4).cells
    return next((m.group(1) for c in cells if c.cell_type == "code" and (m := _PIN.search(c.source))), None)


def paired_notebook(source: Path) -> nbformat.NotebookNode:
    """The unexecuted notebook for a chapter source: its cells, the install cell after the title."""
    nb = jupytext.read(source, fmt="py:percent")
    cells = nb.cells
    if not cells or cells[0].cell_type != "markdown" or not cells[0].source.startswith("# "):
        raise BookError(f"{source.name}: the first cell must be a markdown cell starting with '# Title'")
    if not any("parameters" in c.metadata.get("tags", []) and "PROFILE" in c.source for c in cells):
        raise BookError(
            f"{source.name}: needs a cell tagged 'parameters' (# %% tags=[\"parameters\"]) that sets PROFILE"
        )
    nb.cells = [cells[0], _install_cell(), *cells[1:]]
    for i, cell in enumerate(nb.cells):
        cell.id = f"{source.stem}-{i:03d}"  # stable ids keep the committed notebook diff-free
    nb.metadata = json.loads(json.dumps(NOTEBOOK_METADATA))
    return nb


def sync(write: bool = True) -> list[Path]:
    """Regenerate notebooks/NN_topic.ipynb; return those that were stale (written when ``write``)."""
    stale = []
    for source in sources():
        target = source.with_suffix(".ipynb")
        text = nbformat.writes(paired_notebook(source)) + "\n"
        if not target.exists() or target.read_text() != text:
            stale.append(target)
            if write:
                target.write_text(text)
    return stale


def kernel() -> str:
    """Register (in this environment) a kernel that runs this very Python, and return its name."""
    from ipykernel.kernelspec import install

    install(kernel_name=KERNEL, display_name=f"linrec ({sys.prefix})", prefix=sys.prefix)
    return KERNEL


def prepare_models(profile: str) -> None:
    """Train the profile's zoo up front, all models in parallel workers, if it is not cached yet.

    Chapters would otherwise train each missing model on first use, one at a time.
    """
    from linrec.experiment.profiles import get_profile
    from linrec.models.zoo import build_zoo

    zoo = get_profile(profile).zoo
    if zoo is not None:
        start = time.perf_counter()
        build_zoo(zoo, progress=True)
        print(f"[book] zoo '{zoo.name}' ready in {time.perf_counter() - start:.1f} s", flush=True)


def assignments(pairs: list[str] | None, what: str) -> dict[str, object]:
    """``NAME=VALUE`` pairs as a dict, each value read as YAML (``20`` an int, ``[a, b]`` a list, ``x`` a string)."""
    out: dict[str, object] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BookError(f"{what} '{pair}' is not NAME=VALUE")
        out[key.strip()] = yaml.safe_load(value)
    return out


AFTER_THE_REST = ("10_paper_vs_run",)
"""Chapters that read what the others recorded (the ledger): they start once every other chapter is done."""


def default_jobs(profile: str) -> int:
    """Chapters executed at a time: for the profiles of the project's small zoo models one per core, at most two
    (each chapter computes on one thread, so two use two cores); one for hub-sized profiles, whose chapters each
    hold several GB and share one GPU."""
    from linrec.experiment.profiles import get_profile

    return max(1, min(2, os.cpu_count() or 1)) if get_profile(profile).zoo is not None else 1


@dataclasses.dataclass(frozen=True)
class ChapterRun:
    """One chapter for papermill: the notebook it reads, the YAML file of its parameters, where the result goes."""

    stem: str
    notebook: Path
    parameters: Path
    out: Path


def _start(run: ChapterRun, kernel_name: str, progress_bar: bool) -> subprocess.Popen:
    run.out.unlink(missing_ok=True)  # a failure is then read from this run's notebook, never an older one
    command = [
        sys.executable, "-m", "papermill", str(run.notebook), str(run.out),
        "-f", str(run.parameters), "-k", kernel_name, "--cwd", str(ROOT), "--log-level", "WARNING",
        "--progress-bar" if progress_bar else "--no-progress-bar",
    ]  # fmt: skip
    # A session of its own: stopped as a group when the build stops, never by a Ctrl-C meant for the build.
    return subprocess.Popen(command, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    """End a chapter's papermill process group (its kernel, in a session of its own, exits with its parent)."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _failure(run: ChapterRun, returncode: int) -> str:
    """What stopped a chapter, read from its executed notebook: the first cell that raised."""
    if run.out.exists():
        for cell in nbformat.read(run.out, as_version=4).cells:
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    return (
                        f"cell In [{cell.execution_count}] raised {output.ename}: {output.evalue}\n"
                        f"(the executed notebook with the traceback: {run.out})"
                    )
    return f"papermill exited with status {returncode} before a cell raised; its messages are above"


def run_chapters(runs: list[ChapterRun], kernel_name: str, jobs: int = 1, last: tuple[str, ...] = AFTER_THE_REST):
    """Execute ``runs`` with papermill, ``jobs`` at a time (progress bars only for one at a time), in order but
    for the ``last`` chapters, which start once all the others are done.

    The first failure stops the build: chapters still running are stopped, queued ones never start, and the
    error names the chapter and the cell. An interrupt stops every running chapter the same way.
    """
    queue = [r for r in runs if r.stem not in last] + [r for r in runs if r.stem in last]
    live: dict[str, tuple[subprocess.Popen, float]] = {}
    try:
        while queue or live:
            while queue and len(live) < max(1, jobs):
                if queue[0].stem in last and any(stem not in last for stem in live):
                    break
                run = queue.pop(0)
                print(f"[book] {run.stem}: started", flush=True)
                live[run.stem] = (_start(run, kernel_name, progress_bar=jobs <= 1), time.perf_counter())
            time.sleep(0.2)
            for run in runs:
                if run.stem not in live or (code := live[run.stem][0].poll()) is None:
                    continue
                start = live.pop(run.stem)[1]
                if code != 0:
                    raise BookError(f"{run.stem}: {_failure(run, code)}")
                print(f"[book] {run.stem}: done in {time.perf_counter() - start:.1f} s", flush=True)
    finally:
        for proc, _ in live.values():
            _stop(proc)


def execute(
    profile: str,
    only: list[str] | None = None,
    fields: dict[str, object] | None = None,
    params: dict[str, object] | None = None,
    out_dir: Path = CHAPTERS,
    jobs: int | None = None,
) -> None:
    """Execute each chapter with papermill into ``out_dir`` (book/chapters/), ``jobs`` at a time
    (:func:`default_jobs`), stopping at the first cell error.

    ``fields`` change the profile's fields (passed as ``PROFILE = {"name": profile, **fields}``); ``params``
    set other parameters, each in the chapters whose parameters cell defines it.
    """
    import papermill

    chosen = [s for s in sources() if not only or s.stem in only]
    if only and len(chosen) != len(set(only)):
        raise BookError(f"unknown chapter in {only}; chapters are {[s.stem for s in sources()]}")
    declared = {s.stem: set(papermill.inspect_notebook(str(s.with_suffix(".ipynb")))) for s in chosen}
    unknown = sorted(set(params or {}) - set().union(*declared.values()))
    if unknown:
        raise BookError(f"no chapter of {[s.stem for s in chosen]} has the parameters {unknown}")
    if jobs is not None and jobs < 1:
        raise BookError(f"--jobs must be at least 1, got {jobs}")
    name = kernel()
    os.environ["LINREC_PROGRESS"] = "0"  # the kernels papermill starts inherit it: no progress bars in the pages
    out_dir.mkdir(parents=True, exist_ok=True)
    prepare_models(profile)
    jobs = jobs or default_jobs(profile)
    print(f"[book] profile {profile}: {len(chosen)} chapter(s), {jobs} at a time", flush=True)
    with tempfile.TemporaryDirectory(prefix="linrec-book-") as tmp:
        runs = []
        for source in chosen:
            nb = paired_notebook(source)
            button = (
                f"```{{button-link}} {colab_link(source.stem)}\n:color: primary\n:outline:\n"
                "Open this chapter in Colab\n```"
            )
            nb.cells.insert(1, nbformat.v4.new_markdown_cell(button, id=f"{source.stem}-colab"))
            run = ChapterRun(
                source.stem,
                Path(tmp) / f"{source.stem}.ipynb",
                Path(tmp) / f"{source.stem}.yml",
                out_dir / f"{source.stem}.ipynb",
            )
            nbformat.write(nb, run.notebook)
            parameters = {
                "PROFILE": {"name": profile, **fields} if fields else profile,
                **{k: v for k, v in (params or {}).items() if k in declared[source.stem]},
            }
            run.parameters.write_text(yaml.safe_dump(parameters))
            runs.append(run)
        run_chapters(runs, name, jobs)


def vendor_mathjax() -> None:
    """Copy a local MathJax (from the jupyter-server-mathjax wheel) where _config.yml's mathjax_path
    expects it, so formulas render without a network: offline readers and classrooms included."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")  # locates the files; does not import it
    if spec is None or not spec.submodule_search_locations:
        raise BookError("jupyter-server-mathjax is missing: run `make install` (it is in requirements.txt)")
    target = ROOT / "_build" / "static" / "mathjax"
    if not (target / "MathJax.js").exists():
        shutil.copytree(Path(spec.submodule_search_locations[0]) / "static", target, dirs_exist_ok=True)


def html() -> None:
    """Render the executed chapters with Jupyter Book; any Sphinx warning fails the build."""
    vendor_mathjax()
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe), "build", str(ROOT), "--all", "-W", "-n", "--keep-going"]
    if subprocess.run(cmd, cwd=ROOT).returncode != 0:
        raise BookError("jupyter-book build failed (warnings are errors); see the messages above")


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception): ", re.MULTILINE)


def _output_problems(executed: Path) -> list[str]:
    problems = []
    nb = nbformat.read(executed, as_version=4)
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            text = output.get("text", "") or "".join(
                str(v) for k, v in output.get("data", {}).items() if k.startswith("text/")
            )
            if output.output_type == "error" or _TRACEBACK.search(text):
                problems.append(f"{executed.name}: cell {i} has an error or traceback in its output")
    return problems


def _toc_files(node) -> list[str]:
    if isinstance(node, dict):
        return ([node["file"]] if "file" in node else []) + [f for v in node.values() for f in _toc_files(v)]
    if isinstance(node, list):
        return [f for v in node for f in _toc_files(v)]
    return []


def _toc_chapters() -> list[str]:
    files = _toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    return [f.removeprefix("book/chapters/") for f in files if f.startswith("book/chapters/")]


def toc_problems() -> list[str]:
    """Chapters missing from _toc.yml, and _toc.yml entries without a chapter source."""
    stems, listed = [s.stem for s in sources()], _toc_chapters()
    return [
        f"notebooks/{s}.py is not listed in _toc.yml (add '- file: book/chapters/{s}')"
        for s in stems
        if s not in listed
    ] + [f"_toc.yml lists book/chapters/{s} but there is no notebooks/{s}.py" for s in listed if s not in stems]


def sync_problems() -> list[str]:
    """Why each committed notebook differs from what ``sync`` would write: a stale pin, or stale cells."""
    problems = []
    for path in sync(write=False):
        pinned, name = pinned_commit(path), path.relative_to(ROOT)
        if pinned is not None and pinned != source_commit():
            problems.append(
                f"{name} installs linrec at {pinned[:12]}, but the sources last changed in {source_commit()[:12]}: "
                "run `make notebooks` and commit"
            )
        else:
            problems.append(f"{name} is out of date with its .py source: run `make notebooks` and commit")
    return problems


def check() -> list[str]:
    """Everything wrong with the built book: stale notebooks or pins, TOC gaps, errors, missing figures or Colab
    links."""
    problems = sync_problems() + toc_problems()
    stems = [s.stem for s in sources()]
    for stem in stems:
        executed, page = CHAPTERS / f"{stem}.ipynb", HTML / "book" / "chapters" / f"{stem}.html"
        if not executed.exists() or not page.exists():
            problems.append(f"{stem}: not built (run `make book`)")
            continue
        problems += _output_problems(executed)
        text = page.read_text()
        parsed = _Page()
        parsed.feed(text)
        figures = [s for s in parsed.images if "_images/" in s or s.startswith("data:image")]
        if not figures:
            problems.append(f"{page.relative_to(ROOT)}: no figure")
        if "Traceback (most recent call last)" in text or 'class="output traceback' in text:
            problems.append(f"{page.relative_to(ROOT)}: shows a traceback")
        if colab_link(stem) not in parsed.links:
            problems.append(f"{page.relative_to(ROOT)}: no link to {colab_link(stem)}")
        if not (NOTEBOOKS / f"{stem}.ipynb").exists():
            problems.append(f"notebooks/{stem}.ipynb, the Colab target, does not exist (run `make notebooks`)")
    return problems


def screenshot(page: Path, out: Path) -> Path:
    """A 1280x2000 PNG of ``page`` rendered by headless Chromium (install it: apt-get install chromium)."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        raise BookError("no Chromium found: apt-get install -y chromium (Debian) or install Google Chrome")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile_dir:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile_dir}",
                f"--screenshot={out}",
                "--window-size=1280,2000",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    if not out.exists() or out.stat().st_size < 10_000:
        raise BookError(f"Chromium wrote no usable screenshot of {page} to {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("sync", help="regenerate notebooks/NN_topic.ipynb from the .py sources")
    sub.add_parser("check-sync", help="fail when a committed notebooks/NN_topic.ipynb is stale")
    for step in ("execute", "all"):
        p = sub.add_parser(
            step, help="execute the chapters" + (" then sync and render the book" if step == "all" else "")
        )
        p.add_argument(
            "--profile", default="offline", help="offline (default), smoke, paper or shapes (paper's sizes, no hub)"
        )
        p.add_argument("--only", nargs="+", metavar="NN_topic", help="execute only these chapters")
        p.add_argument(
            "--jobs",
            type=int,
            metavar="N",
            help="chapters executed at a time (default: up to 2, one per core, for offline and smoke; 1 otherwise)",
        )
        p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="change a profile field (repeatable)")
        p.add_argument(
            "--param", action="append", metavar="NAME=VALUE", help="set a chapter parameter where defined (repeatable)"
        )
        if step == "execute":
            p.add_argument("--out", type=Path, default=CHAPTERS, help="where the executed chapters go (book/chapters)")
    sub.add_parser("html", help="render the executed chapters with Jupyter Book (-W)")
    c = sub.add_parser("check", help="check the built book")
    c.add_argument("--screenshot", type=Path, help="also photograph the first chapter into this PNG")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        if args.step in ("all", "html") and (problems := toc_problems()):
            raise BookError("_toc.yml and notebooks/ disagree:\n  " + "\n  ".join(problems))
        if args.step in ("sync", "all"):
            for path in sync():
                print(f"[book] wrote {path.relative_to(ROOT)}")
            if changed := uncommitted_sources():
                print(
                    f"[book] note: the install cells pin {source_commit()[:12]}, which lacks the uncommitted changes "
                    f"to {', '.join(changed)}: commit them, then run `make notebooks` again"
                )
        if args.step == "check-sync" and (problems := sync_problems()):
            raise BookError("stale notebooks:\n  " + "\n  ".join(problems))
        if args.step in ("execute", "all"):
            fields, params = assignments(args.set, "--set"), assignments(args.param, "--param")
            execute(args.profile, args.only, fields, params, getattr(args, "out", CHAPTERS), args.jobs)
        if args.step in ("html", "all"):
            html()
        if args.step == "check":
            if problems := check():
                raise BookError("book check failed:\n  " + "\n  ".join(problems))
            print(f"[book] check passed: {len(sources())} chapters")
            if args.screenshot:
                shot = screenshot(HTML / "book" / "chapters" / f"{sources()[0].stem}.html", args.screenshot)
                print(f"[book] screenshot: {shot}")
    except BookError as err:
        print(f"[book] error: {err}", file=sys.stderr)
        return 1
    print(f"[book] {args.step} took {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
