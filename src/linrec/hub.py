"""The model and dataset hubs: whether they may be used, and whether they can be reached.

Everything that touches the network asks here first, so that a machine without one is told so
within seconds, with the offline profile named as the way to run without it.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request

OFFLINE_HINT = "The 'offline' profile needs no network: `linrec profile --profile offline` or `make book`."


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub endpoint (``HF_ENDPOINT``) answers an HTTP request within ``timeout`` seconds.

    The request goes through the proxies the environment names (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``NO_PROXY``), as the hub client's own do; any HTTP answer counts, and an endpoint that accepts
    the connection but never answers counts as unreachable rather than hanging what follows.
    """
    request = urllib.request.Request(os.environ.get("HF_ENDPOINT", "https://huggingface.co"), method="HEAD")
    try:
        urllib.request.build_opener().open(request, timeout=timeout).close()  # reads the proxies now
    except urllib.error.HTTPError:
        return True  # it answered, if not with 200
    except (OSError, ValueError):  # refused, unresolvable, timed out (URLError is an OSError), malformed URL
        return False
    return True
