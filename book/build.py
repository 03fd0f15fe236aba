"""Build the book: notebooks/NN_topic.py -> notebooks/NN_topic.ipynb -> book/chapters/NN_topic.ipynb -> _build/html.

The steps live in the build package beside this script (:mod:`bookbuild`, not installed with linrec); this is
their command line. ``sync`` regenerates the committed Colab notebooks (:mod:`bookbuild.notebooks`), ``execute``
runs the chapters with papermill for one profile (:mod:`bookbuild.execute`), ``html`` renders them with Jupyter
Book, warnings as errors, with a footer naming the build and a cite page from CITATION.cff
(:mod:`bookbuild.render`, :mod:`bookbuild.publish`), and ``check`` verifies the result (:mod:`bookbuild.check`),
with ``--reader`` every page read in headless Chromium as a reader meets it (:mod:`bookbuild.reader`), and a
screenshot; ``pdf`` prints the executed book as one PDF (:mod:`bookbuild.pdf`); ``compare`` says whether two
copies of executed chapters printed the same results, to the last digit (:mod:`bookbuild.compare`).

    python book/build.py all --profile smoke        # sync + execute + html (what `make book` runs)
    python book/build.py check --reader --screenshot _build/screenshots/01_method.png
    python book/build.py compare /tmp/before/chapters book/chapters   # a restructuring changes no result
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bookbuild.check import check, execution_problems, toc_problems
from bookbuild.compare import compare, report
from bookbuild.execute import assignments, execute
from bookbuild.layout import Book, BookError
from bookbuild.notebooks import sources, sync, sync_problems
from bookbuild.pdf import pdf_pages, pdf_problems, print_book
from bookbuild.reader import page_problems
from bookbuild.render import html
from linrec.errors import LinrecError
from linrec.experiment.profiles import get_profile
from linrec.files import sigterm_interrupts

BOOK = Book(Path(__file__).resolve().parents[1])


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
            p.add_argument("--out", type=Path, default=None, help="where the executed chapters go (book/chapters)")
    sub.add_parser("html", help="render the executed chapters with Jupyter Book (-W)")
    sub.add_parser("pdf", help="the executed book as one PDF (_build/html/linrec-book.pdf), printed by Chromium")
    c = sub.add_parser("check", help="check the built book")
    c.add_argument("--screenshot", type=Path, help="also photograph the first chapter into this PNG (implies --reader)")
    c.add_argument(
        "--reader",
        action="store_true",
        help="also read every page in headless Chromium: content clipped, row numbers printed as data, MathJax "
        "unfinished or failed",
    )
    d = sub.add_parser("compare", help="compare two copies of executed chapters to the last printed digit")
    d.add_argument("before", type=Path, help="the executed chapters before the change (a copy of book/chapters)")
    d.add_argument("after", type=Path, help="the executed chapters after it")
    d.add_argument("--ignore", action="append", default=[], metavar="REGEX", help="also leave out lines matching")
    d.add_argument("--images", action="store_true", help="also compare the figures' PNG bytes")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        with sigterm_interrupts():
            _run(args)
    except BookError as err:
        print(f"[book] error: {err}", file=sys.stderr)
        return 1
    except LinrecError as err:  # bad input: an unknown profile or field, a cache or --out that cannot be written
        print(f"linrec: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the running chapters were stopped, none left half executed
        print("[book] interrupted", file=sys.stderr)
        return 130
    print(f"[book] {args.step} took {time.perf_counter() - start:.1f} s")
    return 0


def _run(args: argparse.Namespace) -> None:
    """The step ``args.step``; a failure raises :class:`BookError` (or :class:`LinrecError` for bad input)."""
    if args.step in ("all", "html") and (problems := toc_problems(BOOK)):
        raise BookError("_toc.yml and notebooks/ disagree:\n  " + "\n  ".join(problems))
    if args.step in ("sync", "all"):
        for path in sync(BOOK):
            print(f"[book] wrote {path.relative_to(BOOK.root)}")
    if args.step == "check-sync" and (problems := sync_problems(BOOK)):
        raise BookError("stale notebooks:\n  " + "\n  ".join(problems))
    if args.step in ("execute", "all"):
        fields, params = assignments(args.set, "--set"), assignments(args.param, "--param")
        execute(BOOK, args.profile, args.only, fields, params, getattr(args, "out", None), args.jobs)
    if args.step in ("html", "all"):
        chapters = get_profile(args.profile).chapters if args.step == "all" and not args.only else ()
        if problems := execution_problems(BOOK, chapters):
            raise BookError("chapters not fully executed (execute them again):\n  " + "\n  ".join(problems))
        html(BOOK, chapters)
    if args.step == "pdf":
        if problems := execution_problems(BOOK):
            raise BookError("chapters not fully executed (execute them again):\n  " + "\n  ".join(problems))
        html(BOOK, builder="singlehtml")
        path, shown = print_book(BOOK)
        if problems := pdf_problems(BOOK, path, shown):
            raise BookError("the PDF is incomplete:\n  " + "\n  ".join(problems))
        print(f"[book] {path.relative_to(BOOK.root)}: {pdf_pages(path)} pages, {shown} figures")
    if args.step == "compare":
        if differences := compare(args.before, args.after, tuple(args.ignore), args.images):
            raise BookError("the executed chapters differ:\n" + report(differences))
        print(f"[book] {args.before} and {args.after}: the same outputs")
    if args.step == "check":
        first = BOOK.page(sources(BOOK)[0].stem)
        problems = check(BOOK)
        if args.reader or args.screenshot:
            pages = sorted((BOOK.html / "book").rglob("*.html"))
            problems += page_problems(pages, BOOK.html, formulas=first, shot=args.screenshot)
        if problems:
            raise BookError("book check failed:\n  " + "\n  ".join(problems))
        print(f"[book] check passed: {len(sources(BOOK))} chapters")
        if args.screenshot:
            print(f"[book] screenshot: {args.screenshot}")


if __name__ == "__main__":
    sys.exit(main())
