"""Hub reachability: an HTTP answer within the timeout, through the environment's proxies."""

import socket
import threading
import time

import pytest

from linrec.hub import hub_reachable

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
