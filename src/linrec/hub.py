"""The model and dataset hubs: whether they may be used, and whether they can be reached.

Everything that touches the network asks here first, so that a machine without one is told so
within seconds, with the offline profile named as the way to run without it.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

OFFLINE_HINT = "The 'offline' profile needs no network: `linrec profile --profile offline` or `make book`."


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether a TCP connection to the hub endpoint (HF_ENDPOINT) opens within ``timeout`` seconds."""
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False
