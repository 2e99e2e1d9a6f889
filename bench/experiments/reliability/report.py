"""Figures, checks and table of the reliability benchmark (bench/experiments/reliability/run.py), from its
run; pure.

Attainment is of sent (ok within the family's default SLO; a refusal counts as a miss), per
family, over a phase's single requests. Memory is the RSS of the Serve proxy and of the ingress
replicas (summed), sampled during each phase; a phase's peak is compared with the quiet
phase's peak. Targets: under slowloris and a 400 MB chunked body, other traffic
loses at most 5 points of attainment and memory grows at most 10%; the slow clients get 408
and are closed; the chunked body gets 413 early (before MAX_EARLY_FACTOR x the body limit has
been sent); the malformed set gets no 5xx and a JSON error for every request. The slow-header
connections, the kills and the soak: bench/experiments/reliability/report_ops.py.
"""

from __future__ import annotations

from typing import Any

from bench.experiments.reliability import report_ops as ops
from bench.experiments.reliability.stats import (
    Row,
    Samples,
    attainment,
    mean_in,
    worst_drop_pts,
)
from bench.experiments.reliability.stats import att_text as _att

TARGET_DROP_PTS = 5.0
TARGET_RSS_GROWTH = 0.10
MAX_EARLY_FACTOR = 4  # the 413 must come before 4 x max_body_bytes have been sent


def rss_peak(samples: Samples, lo_s: float, hi_s: float) -> dict[str, float | None]:
    """Peak RSS per group of the samples taken in [lo_s, hi_s]."""
    chosen = [s for t, s in samples if lo_s <= t <= hi_s]
    return {g: max((s[g] for s in chosen if g in s), default=None) for g in ("proxy", "ingress")}


def _growth(quiet: dict[str, float | None], peak: dict[str, float | None]) -> dict[str, Any]:
    return {g: (peak[g] / q - 1.0 if q and peak.get(g) is not None else None)  # type: ignore[operator]
            for g, q in quiet.items()}


def _mem(m: dict[str, float | None]) -> str:
    return ", ".join(f"{g} {'-' if v is None else f'{v:.0f} MiB'}" for g, v in m.items())


def _traffic_rows(name: str, p: dict[str, Any], quiet: dict[str, Any]) -> list[Row]:
    drop = worst_drop_pts(quiet["attainment"], p["attainment"])
    growth = _growth(quiet["rss_peak_mib"], p["rss_peak_mib"])
    ok_growth = [g <= TARGET_RSS_GROWTH for g in growth.values() if g is not None]
    return [
        Row(f"{name}: other traffic", f"<= {TARGET_DROP_PTS:g} pts below quiet",
            f"{_att(p['attainment'])} (worst drop "
            f"{'-' if drop is None else f'{drop:.1f}'} pts)",
            None if drop is None else drop <= TARGET_DROP_PTS),
        Row(f"{name}: RSS peak", f"<= +{100 * TARGET_RSS_GROWTH:g}% of quiet",
            f"{_mem(p['rss_peak_mib'])} ("
            + ", ".join(f"{g} {'-' if v is None else f'{100 * v:+.1f}%'}"
                        for g, v in growth.items()) + ")",
            all(ok_growth) if ok_growth else None),
    ]


def slow_summary(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """What the slow clients got: answers by status, how many were closed, when."""
    codes: dict[str, int] = {}
    for a in answers:
        key = str(a["status"]) if a["status"] is not None else (
            "connect error" if a["error"] else "no answer")
        codes[key] = codes.get(key, 0) + 1
    times = sorted(a["answer_s"] for a in answers if a["answer_s"] is not None)
    return {"clients": len(answers), "status_codes": codes,
            "closed": sum(1 for a in answers if a["closed"]),
            "answer_s_median": times[len(times) // 2] if times else None,
            "answer_s_max": times[-1] if times else None,
            "closed_s_max": max((a["closed_s"] for a in answers
                                 if a.get("closed_s") is not None), default=None),
            "sent_bytes_max": max((a["sent_bytes"] for a in answers), default=0)}


def slow_row(summary: dict[str, Any], timeout_s: float) -> Row:
    codes, n, closed = summary["status_codes"], summary["clients"], summary["closed"]
    median, last = summary["answer_s_median"], summary["closed_s_max"]
    return Row("slowloris: the slow clients", f"408 after ~{timeout_s:g} s, closed",
               ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()))
               + ("" if median is None else f" (median {median:.1f} s)")
               + f"; closed {closed}/{n}" + ("" if last is None else f" (last {last:.1f} s)"),
               n > 0 and codes.get("408", 0) == n and closed == n)


def chunked_row(a: dict[str, Any], max_body_bytes: int) -> Row:
    early = a["sent_bytes"] <= MAX_EARLY_FACTOR * max_body_bytes
    at = "-" if a["answer_s"] is None else f"{a['answer_s']:.2f} s"
    return Row("chunked 400 MB: the upload", f"413 before {MAX_EARLY_FACTOR} x the body limit",
               f"{a['status']} after {a['sent_bytes'] / 2**20:.1f} MiB sent, {at}"
               f"{', closed' if a['closed'] else ''}",
               a["status"] == 413 and early)


def malformed_rows(answers: list[dict[str, Any]]) -> list[Row]:
    five = [a["name"] for a in answers if a["status"] is None or a["status"] >= 500]
    not_json = [a["name"] for a in answers if not a["json_error"] and a["status"] != 200]
    accepted = [a["name"] for a in answers if a["status"] is not None and a["status"] < 400]
    return [
        Row("malformed set: 5xx", "0", f"{len(five)} of {len(answers)}"
            + (f" ({', '.join(five[:6])})" if five else ""), bool(answers) and not five),
        Row("malformed set: JSON errors", "every answer", f"{len(answers) - len(not_json)} of "
            f"{len(answers)}" + (f" (not: {', '.join(not_json[:6])})" if not_json else "")
            + (f"; accepted (2xx): {', '.join(accepted[:6])}" if accepted else ""),
            bool(answers) and not not_json),
    ]


def rows(fig: dict[str, Any]) -> list[Row]:
    """The table's rows, in the run's order, from `figures`."""
    phases = fig["phases"]
    quiet = phases.get("quiet")
    out = [] if quiet is None else [
        Row("quiet: attainment", "baseline", _att(quiet["attainment"]), None),
        Row("quiet: RSS peak", "baseline", _mem(quiet["rss_peak_mib"]), None)]
    if "slowloris" in phases and quiet is not None:
        p = phases["slowloris"]
        out += _traffic_rows("slowloris", p, quiet)
        out.append(slow_row(p["slow_clients"], fig["body_read_timeout_s"]))
    if "slow_headers" in phases and quiet is not None:
        p = phases["slow_headers"]
        out += _traffic_rows("slow_headers", p, quiet)
        out.append(ops.slow_header_row(p["slow_header_clients"]))
    if "chunked" in phases and quiet is not None:
        p = phases["chunked"]
        out.append(chunked_row(p["upload"], fig["max_body_bytes"]))
        out += _traffic_rows("chunked 400 MB", p, quiet)
    if "malformed" in fig:
        out += malformed_rows(fig["malformed"])
    return out + _ops_rows(phases, quiet)


def _ops_rows(phases: dict[str, Any], quiet: dict[str, Any] | None) -> list[Row]:
    out = []
    if "kill_classifier" in phases and quiet is not None:
        out += ops.kill_classifier_rows(phases["kill_classifier"]["kill"], quiet["attainment"])
    if "kill_controller" in phases and quiet is not None:
        p = phases["kill_controller"]
        out += ops.kill_controller_rows(p["kill"], p["attainment"], quiet["attainment"])
    if "soak" in phases:
        out += ops.soak_rows(phases["soak"]["soak"], phases["soak"]["attainment"])
    return out


def _phase_figures(p: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    fig = {"attainment": attainment(p["singles"], out["slo_ms"], p["single_s"]),
           "rss_peak_mib": rss_peak(out["rss_samples"], p["start_s"], p["end_s"]),
           "loadavg_1min_mean": mean_in(out.get("loadavg_samples", []), p["start_s"],
                                        p["end_s"])}
    if "slow_clients" in p:
        fig["slow_clients"] = slow_summary(p["slow_clients"])
    if "slow_header_clients" in p:
        fig["slow_header_clients"] = ops.slow_header_summary(p["slow_header_clients"],
                                                             p["single_s"])
    if "upload" in p:
        fig["upload"] = p["upload"]
    if p["name"] == "kill_classifier":
        fig["kill"] = ops.kill_classifier_figures(p, out["slo_ms"])
    if p["name"] == "kill_controller":
        fig["kill"] = ops.kill_controller_figures(p)
    if p["name"] == "soak":
        fig["soak"] = ops.soak_figures(p, out["rss_samples"])
    return fig


def figures(out: dict[str, Any]) -> dict[str, Any]:
    """Per phase: attainment per family and RSS peaks; the attacks' answers as they were;
    the kills' and the soak's figures (bench/experiments/reliability/report_ops.py)."""
    phases = {p["name"]: _phase_figures(p, out) for p in out["phases"]}
    fig_all = {"phases": phases, "body_read_timeout_s": out["body_read_timeout_s"],
               "max_body_bytes": out["max_body_bytes"]}
    if "malformed" in out:
        fig_all["malformed"] = out["malformed"]
    table_rows = rows(fig_all)
    return {**fig_all, "rows": [r.to_dict() for r in table_rows],
            "passed": all(r.passed is not False for r in table_rows)}


def table(fig: dict[str, Any]) -> str:
    rs = [Row(**r) for r in fig["rows"]]
    head = ("row", "target", "measured", "pass")
    cells = [(r.row, r.target, r.measured, "-" if r.passed is None else
              ("yes" if r.passed else "NO")) for r in rs]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(4)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
             for row in [head, *cells]]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)
