"""Plans' JSON, read field by field so a malformed file fails naming what is wrong."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from policies.model_selection.table import FORMAT_VERSION as TABLE_FORMAT_VERSION
from policies.model_selection.table import PolicyTable
from policies.tokens.api import BatchingParams, RateRow, RateTable


class JsonObject:
    """Typed getters over one JSON object; `done()` rejects the keys nobody read.

    `where` prefixes every error ("ramsis_policy_set.tables[2].model"), so a bad file says which
    field of which plan broke."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data
        self.where = where
        self._read: set[str] = set()

    def _get(self, key: str) -> Any:
        if key not in self.data:
            raise ValueError(f"{self.where}: missing field {key!r}")
        self._read.add(key)
        return self.data[key]

    def _fail(self, key: str, want: str, value: Any) -> ValueError:
        return ValueError(f"{self.where}.{key}: expected {want}, got {value!r}")

    def has(self, key: str) -> bool:
        return key in self.data

    def skip(self, *keys: str) -> None:
        """Accept these keys without reading them."""
        self._read.update(keys)

    def get_str(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise self._fail(key, "a string", value)
        return value

    def get_choice(self, key: str, valid: tuple[str, ...]) -> str:
        value = self.get_str(key)
        if value not in valid:
            raise self._fail(key, f"one of {list(valid)}", value)
        return value

    def get_int(self, key: str) -> int:
        return as_int(self._get(key), f"{self.where}.{key}")

    def get_float(self, key: str) -> float:
        return as_float(self._get(key), f"{self.where}.{key}")

    def get_optional_int(self, key: str) -> int | None:
        value = self._get(key)
        return None if value is None else as_int(value, f"{self.where}.{key}")

    def get_optional_float(self, key: str) -> float | None:
        value = self._get(key)
        return None if value is None else as_float(value, f"{self.where}.{key}")

    def get_bool(self, key: str) -> bool:
        value = self._get(key)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false", value)
        return value

    def get_list(self, key: str) -> list[Any]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._fail(key, "a list", value)
        return value

    def get_object(self, key: str) -> JsonObject:
        return JsonObject(self._get(key), f"{self.where}.{key}")

    def expect(self, key: str, value: Any) -> None:
        found = self._get(key)
        if found != value:
            raise self._fail(key, repr(value), found)

    def done(self) -> None:
        extra = sorted(set(self.data) - self._read)
        if extra:
            raise ValueError(f"{self.where}: unknown fields {extra}")


def as_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: expected an integer, got {value!r}")
    return value


def as_float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{where}: expected a number, got {value!r}")
    return float(value)


def float_or_inf(value: float | None, where: str) -> float:
    """JSON has no infinity: null stands for it."""
    return math.inf if value is None else as_float(value, where)


def inf_or_float(value: float) -> float | None:
    return None if math.isinf(value) else value


# --- the plans' nested parts ---------------------------------------------------------------


def table_from_json(data: object, where: str) -> PolicyTable:
    t = JsonObject(data, where)
    t.expect("format_version", TABLE_FORMAT_VERSION)
    grid = tuple(as_float(x, f"{where}.grid_s") for x in t.get_list("grid_s"))

    def rows(key: str) -> tuple[tuple[int, ...], ...]:
        raw = t.get_list(key)
        if len(raw) < 1 or any(not isinstance(r, list) or len(r) != len(grid) for r in raw):
            raise ValueError(f"{where}.{key}: expected rows of {len(grid)} integers")
        return tuple(tuple(as_int(x, f"{where}.{key}") for x in r) for r in raw)

    table = PolicyTable(t.get_float("load_qps"), t.get_float("slo_s"), t.get_int("num_workers"),
                        grid, rows("model"), rows("batch"), t.get_int("full_model"),
                        t.get_float("expected_accuracy"), t.get_float("expected_violation"),
                        tuple(str(n) for n in t.get_list("variant_names")))
    t.done()
    if len(table.model) != len(table.batch):
        raise ValueError(f"{where}: model and batch rows differ in number")
    used = {i for r in table.model for i in r} | {table.full_model}
    if any(not 0 <= i < len(table.variant_names) for i in used):
        raise ValueError(f"{where}: variant index outside variant_names")
    return table


def cells_from_json(raw: list[Any], names: tuple[str, ...],
                    where: str) -> tuple[tuple[tuple[tuple[str, int], ...] | None, ...], ...]:
    """MOSEL cells: rows of [[variant name, batch size], ...] or null."""

    def cell(c: Any, at: str) -> tuple[tuple[str, int], ...] | None:
        if c is None:
            return None
        if not isinstance(c, list) or not c:
            raise ValueError(f"{at}: expected null or a list of [variant, batch size]")
        out = []
        for b in c:
            if (not isinstance(b, list) or len(b) != 2 or b[0] not in names):
                raise ValueError(f"{at}: {b!r} is not [variant of {list(names)}, batch size]")
            out.append((str(b[0]), as_int(b[1], at)))
        return tuple(out)

    if any(not isinstance(row, list) for row in raw):
        raise ValueError(f"{where}: expected a list of rows")
    return tuple(tuple(cell(c, f"{where}[{n}][{k}]") for k, c in enumerate(row))
                 for n, row in enumerate(raw))


def cells_json(cells: tuple[tuple[tuple[tuple[str, int], ...] | None, ...], ...]
               ) -> list[list[list[list[Any]] | None]]:
    return [[None if c is None else [[v, b] for v, b in c] for c in row] for row in cells]


def rate_table_from_json(raw: list[Any], where: str) -> RateTable:
    rows = []
    for i, r in enumerate(raw):
        row = JsonObject(r, f"{where}[{i}]")
        rows.append(RateRow(float_or_inf(row.get_optional_float("max_qps"), row.where),
                            row.get_int("gamma")))
        row.done()
    return RateTable(tuple(rows))


def rate_table_json(table: RateTable) -> list[dict[str, Any]]:
    return [{"max_qps": inf_or_float(float(r.max_qps)), "gamma": r.gamma} for r in table.rows]


def batching_from_json(b: JsonObject) -> BatchingParams:
    params = BatchingParams(b.get_float("max_wait_s"), b.get_int("max_batch_size"),
                            b.get_float("max_deadline_gap_s"), b.get_float("max_utility_gap"))
    b.done()
    return params


def batching_json(b: BatchingParams) -> dict[str, Any]:
    return {"max_wait_s": float(b.max_wait_s), "max_batch_size": b.max_batch_size,
            "max_deadline_gap_s": float(b.max_deadline_gap_s),
            "max_utility_gap": float(b.max_utility_gap)}
