"""Every figure in README.md's figures table is the number in its committed data file.

The table sits between `<!-- figures:begin -->` and `<!-- figures:end -->`. Per row:

- the **value** cell holds the figure's numbers (unsigned: digits with an optional decimal
  part; words, units and separators around them are ignored);
- the **source** cell holds backticked tokens, read left to right: a data file (a path ending in
  `.json`, optionally with `*` or `{a,b}` to name several, or `archive.tar.gz!member.json`),
  then one or more expressions, each evaluated over the files named just before it (a file
  token after an expression starts a new set). An expression is a key path (dotted keys, list
  indices, `*` for every element) or a named derivation around one: `pct(x)` (x 100),
  `abs(x)`, `ratio(a, b)` (element by element), `min(x)`, `max(x)`, `median(x)`, `count(x)`,
  `count_below_one(x)`.
- the expressions' values, in order, are matched one to one with the value cell's numbers; a
  number shown with d decimals matches when the file's value rounds to it (|file - shown| <=
  half a unit of the last shown digit).
"""

from __future__ import annotations

import glob
import json
import re
import statistics
import tarfile
from pathlib import Path

import pytest

from bench.core.result import read_result

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
NUMBER = re.compile(r"\d+(?:\.\d+)?")
CALL = re.compile(r"^(\w+)\((.*)\)$")
AGGREGATES = {
    "min": min, "max": max, "median": statistics.median, "count": len,
    "count_below_one": lambda xs: sum(1 for x in xs if x < 1),
}
ELEMENTWISE = {"pct": lambda x: 100 * x, "abs": abs}


class FigureError(Exception):
    pass


def figure_rows(text: str) -> list[dict[str, str]]:
    """The figures table's rows as {column: cell}."""
    if BEGIN not in text or END not in text:
        raise FigureError("no figures block")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    lines = [ln.strip() for ln in block.splitlines() if ln.strip().startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    header = [h.lower() for h in cells[0]]
    return [dict(zip(header, row, strict=True)) for row in cells[2:]]


def _expand(spec: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", spec)
    if not m:
        return [spec]
    return [x for alt in m.group(1).split(",")
            for x in _expand(spec[:m.start()] + alt + spec[m.end():])]


def load_files(spec: str, root: Path = ROOT) -> list[object]:
    """The JSON documents a file token names (in sorted order for a glob)."""
    out = []
    for one in _expand(spec):
        archive, _, member = one.partition("!")
        paths = sorted(glob.glob(str(root / archive))) if "*" in archive else [str(root / archive)]
        if not paths or not all(Path(p).is_file() for p in paths):
            raise FigureError(f"no file {archive}")
        for path in paths:
            if member:
                with tarfile.open(path) as tar:
                    try:
                        f = tar.extractfile(member)
                    except KeyError:
                        f = None
                    if f is None:
                        raise FigureError(f"no member {member} in {archive}")
                    out.append(json.load(f))
            else:
                # an experiment's Result: its figures are its data (a bare record: itself)
                out.append(read_result(Path(path))["data"])
    return out


def _step(node: object, parts: list[str], where: str) -> list[object]:
    if not parts:
        return [node]
    head, rest = parts[0], parts[1:]
    if head == "*":
        items = node.values() if isinstance(node, dict) else node
        return [v for item in items for v in _step(item, rest, where)]
    if isinstance(node, list) and head.isdigit() and int(head) < len(node):
        return _step(node[int(head)], rest, where)
    if isinstance(node, dict):
        for n in range(len(parts), 0, -1):  # keys may hold dots: the longest key first
            key = ".".join(parts[:n])
            if key in node:
                return _step(node[key], parts[n:], where)
    raise FigureError(f"no key {head!r} in {where}")


def _split_args(args: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in args:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()]


def evaluate(expr: str, docs: list[object], where: str) -> list[float]:
    """An expression's values over the documents, in order."""
    m = CALL.match(expr)
    if not m:
        values = [v for doc in docs for v in _step(doc, expr.split("."), f"{where} {expr}")]
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int | float)]
        if bad:
            raise FigureError(f"{where} {expr}: not a number: {bad[0]!r}")
        return [float(v) for v in values]
    name, args = m.group(1), [evaluate(a, docs, where) for a in _split_args(m.group(2))]
    if name in ELEMENTWISE and len(args) == 1:
        return [ELEMENTWISE[name](x) for x in args[0]]
    if name in AGGREGATES and len(args) == 1 and args[0]:
        return [float(AGGREGATES[name](args[0]))]
    if name == "ratio" and len(args) == 2 and len(args[0]) == len(args[1]):
        return [a / b for a, b in zip(args[0], args[1], strict=True)]
    raise FigureError(f"{where}: bad derivation {expr}")


def source_values(source: str, root: Path = ROOT) -> list[float]:
    """The values a source cell names, in order."""
    tokens = re.findall(r"`([^`]+)`", source)
    docs: list[object] = []
    spec, values, last_was_expr = "", [], True
    for tok in tokens:
        if tok.split("!")[0].endswith((".json", ".tar.gz")):
            docs = (docs if not last_was_expr else []) + load_files(tok, root)
            spec, last_was_expr = tok, False
        else:
            if not docs:
                raise FigureError(f"expression {tok} before any file")
            values += evaluate(tok, docs, spec)
            last_was_expr = True
    if not values:
        raise FigureError("no expression in the source cell")
    return values


def mismatches(row: dict[str, str], root: Path = ROOT) -> list[str]:
    """What is wrong with one row: [] when its value cell is its files' numbers."""
    try:
        got = source_values(row["source"], root)
    except FigureError as e:
        return [str(e)]
    shown = NUMBER.findall(row["value"])
    if len(shown) != len(got):
        return [f"value {row['value']!r} shows {len(shown)} numbers, source gives {len(got)}"]
    out = []
    for text, value in zip(shown, got, strict=True):
        decimals = len(text.partition(".")[2])
        if abs(value - float(text)) > 0.5 * 10 ** -decimals + 1e-9:
            out.append(f"shown {text}, file says {value:.{decimals + 3}f}")
    return out


def _readme_rows() -> list[dict[str, str]]:
    return figure_rows((ROOT / "README.md").read_text())


def _rows_or_none() -> list[dict[str, str]]:
    try:  # a missing block fails test_the_block_is_there..., not the collection
        return _readme_rows()
    except FigureError:
        return []


def test_the_block_is_there_with_every_column():
    rows = _readme_rows()
    assert len(rows) >= 10
    for row in rows:
        assert set(row) == {"figure", "workload", "baseline", "value", "source", "note"}
        assert row["value"] and row["source"], row


@pytest.mark.parametrize("row", _rows_or_none(), ids=lambda r: r["figure"][:60])
def test_readme_figure_matches_its_file(row):
    assert mismatches(row) == [], (row["figure"], row["value"], row["source"])


def test_the_check_fails_on_a_changed_value():
    row = next(r for r in _readme_rows() if not mismatches(r))
    first = NUMBER.search(row["value"])
    assert first is not None
    wrong = str(round(float(first.group()) + 7, 3))
    changed = {**row, "value": row["value"][:first.start()] + wrong + row["value"][first.end():]}
    assert mismatches(changed)


def test_the_check_fails_on_a_missing_file_or_key(tmp_path):
    (tmp_path / "d.json").write_text(json.dumps({"a": {"b.c": [1.234, 2.0]}, "n": None}))
    ok = {"value": "1.23 / 2", "source": "`d.json` `a.b.c.0` `a.b.c.1`"}
    assert mismatches(ok, tmp_path) == []
    assert mismatches({**ok, "value": "1.24 / 2"}, tmp_path)
    assert mismatches({**ok, "source": "`e.json` `a.b.c.0` `a.b.c.1`"}, tmp_path)
    assert mismatches({**ok, "source": "`d.json` `a.x.0` `a.b.c.1`"}, tmp_path)
    assert mismatches({"value": "0", "source": "`d.json` `n`"}, tmp_path)


def test_derivations_and_archives(tmp_path):
    for i, x in enumerate((0.5, 0.9, 1.2)):
        (tmp_path / f"r{i}.json").write_text(json.dumps({"k": {"x": x, "n": 2}}))
    with tarfile.open(tmp_path / "a.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "r0.json", arcname="in/r0.json")
    src = ("`r*.json` `min(k.x)` `median(k.x)` `max(k.x)` `count_below_one(k.x)` `count(k.x)`"
           " `a.tar.gz!in/r0.json` `pct(ratio(k.x, k.n))`")
    assert source_values(src, tmp_path) == pytest.approx([0.5, 0.9, 1.2, 2, 3, 25.0])
    assert mismatches({"value": "x", "source": "`a.tar.gz!in/no.json` `k.x`"}, tmp_path)
    assert mismatches({"value": "1", "source": "`r{0,1}.json` `k.x`"}, tmp_path)
