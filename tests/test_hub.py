"""linrec.hub: The model and dataset hubs: whether they may be used, whether they can be reached, and what a revision
is."""

from __future__ import annotations

import os
import socket
import threading
import time
from types import SimpleNamespace

import pytest

import linrec.hub as hub
from linrec import LinrecError
from linrec.data.corpora import load_corpus
from linrec.hub import OFFLINE_HINT, datasets_offline, hub_reachable, resolve_revision, use_hub_timeouts
from support.hub_corpora import OTHER, SHA

PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
)


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch):
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def serve(reply: bytes | None) -> tuple[int, list[bytes]]:
    """A one-thread server on localhost that answers every request with ``reply`` (None: never answers)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    requests: list[bytes] = []

    def run() -> None:
        while True:
            conn, _ = server.accept()
            requests.append(conn.recv(4096))
            if reply is not None:
                conn.sendall(reply)
                conn.close()

    threading.Thread(target=run, daemon=True).start()
    return server.getsockname()[1], requests


class FakeApi:
    """Stands in for huggingface_hub.HfApi: answers with ``sha``, or raises ``error``; records its calls."""

    calls: list = []
    sha: str | None = SHA
    error: Exception | None = None

    def __init__(self, endpoint=None):
        self.endpoint = endpoint

    def _info(self, kind, repo_id, revision=None, timeout=None):
        FakeApi.calls.append((kind, repo_id, revision, timeout, self.endpoint))
        if FakeApi.error is not None:
            raise FakeApi.error
        return SimpleNamespace(sha=FakeApi.sha)

    def model_info(self, repo_id, revision=None, timeout=None):
        return self._info("model", repo_id, revision, timeout)

    def dataset_info(self, repo_id, revision=None, timeout=None):
        return self._info("dataset", repo_id, revision, timeout)


@pytest.fixture
def fake_api(monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(FakeApi, "calls", [])
    monkeypatch.setattr(FakeApi, "error", None)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.test")
    return FakeApi


def test_an_endpoint_that_never_answers_is_unreachable_within_the_timeout(monkeypatch):
    port, _ = serve(None)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    assert not hub_reachable(timeout=1.0)
    assert time.monotonic() - start < 5


def test_any_http_answer_counts_and_a_closed_port_does_not(monkeypatch):
    port, _ = serve(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert hub_reachable(timeout=2.0)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed.getsockname()[1]}")
    closed.close()
    assert not hub_reachable(timeout=2.0)


def test_the_request_goes_through_the_environments_proxy(monkeypatch):
    port, requests = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid")  # resolvable only by the proxy
    assert not hub_reachable(timeout=2.0)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    assert hub_reachable(timeout=2.0)
    assert requests and requests[-1].startswith(b"HEAD http://hub.invalid")


def test_resolve_revision_asks_with_a_timeout_records_the_ref_and_finds_it_offline(fake_api, tmp_path, monkeypatch):
    assert resolve_revision("org/model", OTHER, cache_dir=tmp_path) == OTHER  # a commit: no request
    assert fake_api.calls == []
    assert resolve_revision("org/model", cache_dir=tmp_path, timeout=2.5) == SHA
    assert resolve_revision("org/data", "v1", repo_type="dataset", cache_dir=tmp_path) == SHA
    assert fake_api.calls == [
        ("model", "org/model", None, 2.5, "http://hub.test"),
        ("dataset", "org/data", "v1", hub.HUB_TIMEOUT, "http://hub.test"),
    ]
    assert (tmp_path / "models--org--model" / "refs" / "main").read_text() == SHA
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_revision("org/model", cache_dir=tmp_path) == SHA
    assert resolve_revision("org/model", "step1", cache_dir=tmp_path) is None
    assert resolve_revision("org/data", "v1", repo_type="dataset", cache_dir=tmp_path) == SHA
    assert len(fake_api.calls) == 2
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")  # datasets' own switch wins for datasets
    resolve_revision("org/data", "v2", repo_type="dataset", cache_dir=tmp_path)
    assert fake_api.calls[-1][:3] == ("dataset", "org/data", "v2")
    with pytest.raises(LinrecError, match="repo_type"):
        resolve_revision("org/model", repo_type="space")


def test_a_failing_hub_falls_back_on_the_recorded_commit_else_names_the_offline_profile(fake_api, tmp_path):
    resolve_revision("org/model", cache_dir=tmp_path)
    fake_api.error = TimeoutError("read timed out")
    with pytest.warns(UserWarning, match="using the cached commit"):
        assert resolve_revision("org/model", cache_dir=tmp_path) == SHA
    with pytest.raises(LinrecError, match="TimeoutError: read timed out") as err:
        resolve_revision("org/model", "step1", cache_dir=tmp_path)
    assert OFFLINE_HINT in str(err.value)
    with pytest.raises(LinrecError, match=r"read timed out\nrun something else$"):  # a caller's own hint instead
        resolve_revision("org/model", "step1", cache_dir=tmp_path, hint="run something else")
    assert resolve_revision("org/model", "step1", cache_dir=tmp_path, local_files_only=True) is None


@pytest.mark.slow
def test_a_silent_endpoint_fails_within_seconds(monkeypatch, tmp_path):
    port, requests = serve(None)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("LINREC_CACHE", str(tmp_path))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    start = time.monotonic()
    with pytest.raises(LinrecError) as err:
        resolve_revision("org/model", timeout=1.0, cache_dir=tmp_path)
    assert OFFLINE_HINT in str(err.value) and requests  # it was asked, and gave up
    with pytest.raises(LinrecError) as err:
        load_corpus("wikitext-2")
    assert OFFLINE_HINT in str(err.value)
    assert time.monotonic() - start < 10


def test_hub_timeouts_get_defaults_but_never_replace_the_users(monkeypatch):
    from huggingface_hub import constants

    for name in hub.HUB_TIMEOUT_DEFAULTS:
        monkeypatch.setattr(constants, name, getattr(constants, name))
        monkeypatch.setenv(name, "0")  # so that monkeypatch restores the variable, set or not
    monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "60")
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 60)
    use_hub_timeouts()
    assert os.environ["HF_HUB_ETAG_TIMEOUT"] == "5" and constants.HF_HUB_ETAG_TIMEOUT == 5
    assert os.environ["HF_HUB_DOWNLOAD_TIMEOUT"] == "60" and constants.HF_HUB_DOWNLOAD_TIMEOUT == 60


def test_datasets_offline_follows_its_own_variable_else_the_hubs(monkeypatch):
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert datasets_offline()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert not datasets_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "true")
    assert datasets_offline()
