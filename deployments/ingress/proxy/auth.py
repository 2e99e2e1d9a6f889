"""API keys: `Authorization: Bearer <key>` (as OpenAI clients send it), checked in constant time
against keys read from an environment secret and/or a file.

One pure check (`check`) decides for both places that enforce it: the Serve proxy's front door
(deployments/ingress/proxy/front_door.py: a refused caller costs no ingress time) and the ingress app
itself (deployments/ingress/proxy/edge.py `AuthGate`: refuses too if reached without the front door).

| request | answer |
|---|---|
| no keys configured | served (the local default; the server logs that it is open) |
| `/healthz`, `/-/healthz` (Serve's proxy health) | served, always |
| `/metrics` with `protect_metrics: false` | served |
| no `Authorization: Bearer <key>` header | 401 `missing_api_key`, `WWW-Authenticate: Bearer` |
| a key that is not one of the configured keys | 401 `invalid_api_key`, `WWW-Authenticate: Bearer error="invalid_token"` |

A wrong key is 401, not 403 (RFC 6750 `invalid_token`; OpenAI answers a bad key the same way):
403 would mean "a valid key without the right", and keys here carry no rights.
Keys are stored as SHA-256 digests and every stored digest is compared with
`hmac.compare_digest`, so neither a key's content nor its length shows in the timing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from deployments.config import StrictConfig

KEYS_ENV = "ADAPTSERVE_API_KEYS"
OPEN_PATHS = frozenset({"/healthz", "/-/healthz"})
METRICS_PATH = "/metrics"
_KEY = re.compile(r"[\x21-\x7e]+")  # printable ASCII, no spaces


class AuthConfig(StrictConfig):
    api_keys_env: str | None = Field(
        default=KEYS_ENV,
        description="environment variable holding API keys (comma, space or newline "
                    "separated); unset or empty: no keys from it")
    api_keys_file: str | None = Field(
        default=None,
        description="file of API keys, one per line ('#' starts a comment); when set, it must "
                    "exist and hold a key (an empty or missing secret never opens the server)")
    protect_metrics: bool = Field(
        default=True, description="/metrics needs a key too (false: open, for scrapers)")


@dataclass(frozen=True)
class ApiKeys:
    """The configured keys as SHA-256 digests; none: the server is open."""

    digests: tuple[bytes, ...] = ()
    protect_metrics: bool = True
    source: str = "none"

    @property
    def open(self) -> bool:
        return not self.digests

    def describe(self) -> str:
        """One log line; never shows a key."""
        if self.open:
            return ("no API keys configured: every route is open to anyone who can reach this "
                    f"port (set {KEYS_ENV} or auth.api_keys_file; docs/serving.md, API keys)")
        return (f"API keys: {len(self.digests)} from {self.source}; /healthz open, /metrics "
                f"{'protected' if self.protect_metrics else 'open'}")


@dataclass(frozen=True)
class AuthRefusal:
    status: int
    type: str
    message: str
    headers: tuple[tuple[str, str], ...]


def parse_keys(text: str, where: str) -> list[str]:
    """Keys in `text`: separated by commas, spaces or newlines; a '#' line is a comment."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    keys = [k for k in re.split(r"[\s,]+", "\n".join(lines)) if k]
    bad = [i for i, k in enumerate(keys) if not _KEY.fullmatch(k)]
    if bad:
        raise ValueError(f"{where}: key #{bad[0] + 1} is not printable ASCII")
    return keys


def load_keys(config: AuthConfig, environ: Mapping[str, str]) -> ApiKeys:
    """The keys of `config` (its env variable in `environ`, its file). A configured file that
    is missing, unreadable or empty raises: the server must not start open by mistake."""
    keys: list[str] = []
    sources: list[str] = []
    if config.api_keys_env and environ.get(config.api_keys_env, "").strip():
        keys += parse_keys(environ[config.api_keys_env], f"env {config.api_keys_env}")
        sources.append(f"env {config.api_keys_env}")
    if config.api_keys_file:
        try:
            text = Path(config.api_keys_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"auth.api_keys_file: cannot read {config.api_keys_file}: "
                             f"{exc}") from None
        found = parse_keys(text, f"auth.api_keys_file {config.api_keys_file}")
        if not found:
            raise ValueError(f"auth.api_keys_file {config.api_keys_file} holds no key; "
                             "refusing to start open")
        keys += found
        sources.append(f"file {config.api_keys_file}")
    digests = tuple(dict.fromkeys(_digest(k.encode("ascii")) for k in keys))
    return ApiKeys(digests, config.protect_metrics, ", ".join(sources) or "none")


def check(keys: ApiKeys, path: str, authorization: str | None) -> AuthRefusal | None:
    """None when the request may pass, else the 401 to answer. `authorization` is the
    header's value as sent (latin-1 decoded, as ASGI servers give it)."""
    if keys.open or path in OPEN_PATHS or (path == METRICS_PATH and not keys.protect_metrics):
        return None
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return AuthRefusal(401, "missing_api_key",
                           "this server needs an API key: send `Authorization: Bearer <key>`",
                           (("WWW-Authenticate", 'Bearer realm="adaptserve"'),))
    presented = _digest(token.encode("latin-1", "replace"))
    match = False
    for digest in keys.digests:  # all of them: the time does not say which one matched
        match |= hmac.compare_digest(digest, presented)
    if match:
        return None
    return AuthRefusal(401, "invalid_api_key", "the API key sent is not valid",
                       (("WWW-Authenticate",
                         'Bearer realm="adaptserve", error="invalid_token"'),))


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()
