"""Strict JSON for request bodies: what `json.loads` lets through or crashes on, refused with the
problem named (-> 400, never a 500).

- `NaN`, `Infinity`, `-Infinity` are not JSON (RFC 8259): `malformed_json`;
- a number that does not fit a double (`1e400`) or is written with more than
  `max_number_chars` characters (a 5,000-digit integer): `json_limit_exceeded`;
- arrays/objects nested deeper than `max_depth`: `json_limit_exceeded` (Python's own parser
  would raise RecursionError past ~1,000 levels).

Pure: no I/O, no asyncio; the ingress (service.parse_body) uses it on every body.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

MALFORMED = "malformed_json"
LIMIT = "json_limit_exceeded"
OUT_OF_RANGE = ("a number is out of range: JSON numbers here must fit a double "
                "(at most ~1.8e308)")
_INF = math.inf


@dataclass(frozen=True)
class JsonLimits:
    max_depth: int = 32  # our bodies need 4 (a job's item's audio list)
    max_number_chars: int = 64  # characters of one number as written (sign, digits, exponent)


class JsonProblem(ValueError):
    """Why a body is refused; `type` is the ErrorResponse type (malformed_json or
    json_limit_exceeded)."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message


def loads_strict(body: bytes | str, limits: JsonLimits = JsonLimits()) -> Any:
    """The parsed body, or JsonProblem naming what is wrong with it."""
    def parse_int(text: str) -> int:  # before int(): CPython refuses 4,300+ digits itself
        if len(text) > limits.max_number_chars:
            raise JsonProblem(LIMIT, f"a number is written with {len(text)} characters "
                              f"({text[:12]}...); at most {limits.max_number_chars} are accepted")
        return int(text)

    def parse_constant(name: str) -> Any:
        raise JsonProblem(MALFORMED, f"request body is not valid JSON: {name} is not a JSON "
                                     f"number (numbers must be finite)")
    try:
        data = json.loads(body, parse_int=parse_int, parse_constant=parse_constant)
    except JsonProblem:
        raise
    except RecursionError:
        raise JsonProblem(LIMIT, _too_deep(limits.max_depth)) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise JsonProblem(MALFORMED, f"request body is not valid JSON: {exc}") from None
    check_tree(data, limits.max_depth)
    return data


def check_tree(data: Any, max_depth: int) -> None:
    """JsonProblem when arrays/objects nest deeper than `max_depth` (the outermost is level 1)
    or a number overflowed to infinity (`1e400`; NaN and Infinity literals never get here).
    Iterative, so any depth is safe to check; the infinity test runs in C per container."""
    if data in (_INF, -_INF):
        raise JsonProblem(LIMIT, OUT_OF_RANGE)
    stack = [(data, 1)] if isinstance(data, dict | list) else []
    while stack:
        value, depth = stack.pop()
        if depth > max_depth:
            raise JsonProblem(LIMIT, _too_deep(max_depth))
        children = value.values() if isinstance(value, dict) else value
        if _INF in children or -_INF in children:
            raise JsonProblem(LIMIT, OUT_OF_RANGE)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def _too_deep(max_depth: int) -> str:
    return f"request body nests arrays/objects deeper than {max_depth} levels (the limit)"
