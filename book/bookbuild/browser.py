"""Headless Chromium driven over the DevTools protocol: open a page, wait until its MathJax has finished, read it
with JavaScript, photograph it or print it.

The protocol runs over the two file descriptors Chromium is given with ``--remote-debugging-pipe`` (it reads
commands on 3 and writes replies and events on 4, each a JSON object ended by a NUL byte), so no port is opened
and nothing beyond the standard library is needed. A page counts as *settled* once its load event has fired,
MathJax has run its startup typesetting and whatever it queued after it (``StartupHook("End")`` then
``Hub.Queue``: MathJax 2's own signal that it is done) and its "Loading ..." message is gone; fixed waits of
virtual time, which were used before, could photograph the message still in the corner.

Why not a maintained driver (weighed 2026-11-28; CONTRIBUTING.md, "Why the book drives Chromium itself"): Playwright
would replace only the transport here (about 100 lines) with a 40 MB wheel and a Node.js driver to pin and hash;
Selenium needs a matching ``chromedriver``, which it downloads; neither knows when MathJax 2 is done, which is most of
what this module waits for. Playwright stays the choice if the protocol code grows.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from bookbuild.layout import BookError

WIDTH = 1280
"""The window width pages are read and photographed at (px): a laptop's."""

SETTLED = """(async () => {
  const hub = window.MathJax && MathJax.Hub;
  if (hub) {  // two steps: a Queue call made inside the End hook never runs
    await new Promise(resolve => hub.Register.StartupHook("End", resolve));
    await new Promise(resolve => hub.Queue(resolve));
  }
  const shown = () => {  // MathJax's "Loading ..." box, hidden again once it is done
    const box = document.getElementById("MathJax_Message");
    return box && box.style.display !== "none" && box.textContent.trim() !== "" ? box.textContent.trim() : "";
  };
  for (let i = 0; i < 50 && shown(); i++) await new Promise(resolve => setTimeout(resolve, 100));
  return !hub ? "no mathjax" : shown() ? `mathjax done, message still shown: ${shown()}` : "mathjax done";
})()"""
"""A promise that resolves, with how, once the page is settled (see the module's docstring)."""


def chromium() -> str:
    """The Chromium (or Chrome) on this machine, or a message saying how to install it."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        raise BookError("no Chromium found: apt-get install -y chromium (Debian) or install Google Chrome")
    return browser


class Browser:
    """One headless Chromium for several pages: ``with Browser() as b: tab = b.open(page)``."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self._next = 0
        self._messages: queue.Queue[dict | None] = queue.Queue()

    def __enter__(self) -> Browser:
        self._profile = tempfile.TemporaryDirectory()
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def child_fds() -> None:  # Chromium reads commands on 3 and writes replies on 4
            read, write = os.dup(commands_read), os.dup(replies_write)
            os.dup2(read, 3)
            os.dup2(write, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}", "about:blank"]  # fmt: skip
        self._process = subprocess.Popen(
            [chromium(), *flags],
            pass_fds=(3, 4),
            preexec_fn=child_fds,  # noqa: PLW1509 (no threads touch the child between fork and exec)
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        try:
            self.send("Browser.close")
        except BookError:
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._profile.cleanup()

    def _read(self) -> None:
        """Split Chromium's output into messages, until it closes the pipe (then a None)."""
        pending = b""
        while chunk := os.read(self._replies, 1 << 16):
            *done, pending = (pending + chunk).split(b"\0")
            for message in done:
                self._messages.put(json.loads(message))
        self._messages.put(None)

    def _message(self, deadline: float, what: str) -> dict:
        try:
            message = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise BookError(f"Chromium did not answer {what} within {self.timeout:.0f} s") from None
        if message is None:
            raise BookError(f"Chromium exited while answering {what}")
        return message

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and return its result (events that arrive meanwhile are not needed here)."""
        self._next += 1
        command: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._message(deadline, method)
            if message.get("id") == self._next:
                if "error" in message:
                    raise BookError(f"Chromium refused {method}: {message['error'].get('message')}")
                return message.get("result", {})

    def open(self, page: Path, width: int = WIDTH, height: int = 900) -> Tab:
        """``page`` in a new tab of ``width`` x ``height`` px, loaded and settled."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Tab(self, session, page, width, height)
        tab.window(height)
        self.send("Emulation.setFocusEmulationEnabled", {"enabled": True}, session)  # else a new tab's timers wait
        uri = page.resolve().as_uri()
        self.send("Page.navigate", {"url": uri}, session)
        deadline = time.monotonic() + self.timeout
        while tab.evaluate("document.readyState === 'complete' && location.href") != uri:  # not about:blank's load
            if time.monotonic() > deadline:
                raise BookError(f"Chromium did not load {page} within {self.timeout:.0f} s")
            time.sleep(0.05)
        tab.settled = tab.evaluate(SETTLED)
        return tab


class Tab:
    """A page open in :class:`Browser`: run JavaScript in it, photograph it, print it."""

    def __init__(self, browser: Browser, session: str, page: Path, width: int, height: int) -> None:
        self.browser, self.session, self.page = browser, session, page
        self.width, self.height = width, height
        self.settled = ""

    def window(self, height: int) -> None:
        """Make the window ``height`` px tall at the tab's width (no mobile emulation, one pixel per CSS px)."""
        metrics = {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.browser.send("Emulation.setDeviceMetricsOverride", metrics, self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` (awaited when it is a promise), as JSON gives it back."""
        reply = self.browser.send(
            "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, self.session
        )
        if "exceptionDetails" in reply:
            detail = reply["exceptionDetails"]
            raise BookError(
                f"{self.page.name}: script failed: {detail.get('exception', {}).get('description', detail)}"
            )
        return reply["result"].get("value")

    def screenshot(self, out: Path, height: int | None = None) -> Path:
        """A PNG of the page's top ``height`` px (the whole page when None) at the tab's width, as a window that tall
        shows it: the window is made that tall for the shot, then given its height back. (Chromium's capture beyond
        the window instead showed a page whose wide table scrolls in its box shifted left, its sidebar cut off.)"""
        width, full = self.evaluate("[document.documentElement.clientWidth, document.documentElement.scrollHeight]")
        tall = min(height or full, full)
        self.window(tall)
        try:
            self.evaluate("new Promise(drawn => requestAnimationFrame(() => requestAnimationFrame(drawn)))")
            clip = {"x": 0, "y": 0, "width": width, "height": tall, "scale": 1}
            shot = self.browser.send("Page.captureScreenshot", {"format": "png", "clip": clip}, self.session)
        finally:
            self.window(self.height)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(shot["data"]))
        return out

    def pdf(self, out: Path) -> Path:
        """The page printed to PDF on A4 with the browser's own pagination (backgrounds and figures included)."""
        printed = self.browser.send(
            "Page.printToPDF",
            {"paperWidth": 8.27, "paperHeight": 11.69, "printBackground": True, "preferCSSPageSize": True},
            self.session,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(printed["data"]))
        return out
