"""Waiting for something to come up, one way: poll a check until it answers or time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.core import http


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, every_s: float = 1.0) -> Any:
    """`check()`'s first truthy value, tried every `every_s`; TimeoutError after `timeout_s`
    naming `what` and the last answer (an exception while starting counts as not yet)."""
    end, last = time.time() + timeout_s, None
    while time.time() < end:
        try:
            out = check()
            if out:
                return out
            last = out
        except Exception as exc:  # a server still starting answers with errors
            last = exc
        time.sleep(every_s)
    raise TimeoutError(f"{what}: not after {timeout_s:g} s (last: {last!r})")


def http_ok(url: str) -> bool:
    """Whether GET `url` answers 200 now (no answer at all: False)."""
    try:
        return http.get(url, timeout_s=5.0).status_code == 200
    except http.HttpTransportError:
        return False


def wait_http_ok(url: str, timeout_s: float, every_s: float = 1.0) -> float:
    """Seconds until GET `url` answers 200; TimeoutError naming the URL otherwise."""
    t0 = time.time()
    wait_for(f"GET {url} -> 200", lambda: http_ok(url), timeout_s, every_s)
    return time.time() - t0
