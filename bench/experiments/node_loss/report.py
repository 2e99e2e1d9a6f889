"""Figures, checks, table and timeline plot of the node-loss benchmark (bench/experiments/node_loss/run.py),
from its run; pure but for the plot.

Times are seconds after the node stop (SIGTERM to its `ray start`). The gap is seen by the
clients: it starts with the first 5xx answer after the stop and ends with the first 200
answer to a request sent after that one (the app served again); /healthz's and /v1/status's
gaps likewise (non-200 or the family not healthy). Targets: every request sent has
exactly one HTTP answer (no other request's id echoed; connection errors and client timeouts
counted apart, and 0), no 5xx but 503, and the refusals while the family is down are fast
(p99 < FAST_MS). The requests that were waiting in an ingress when the family's last replica
went (their 503 says so: LOST_MARK) are reported apart: their latency is how long the ingress
took to see the loss. Attainment (ok within the SLO, of sent) of the steady period before the
stop and from the first 200 after the gap to the end is reported beside them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.core.stats import percentile

FAST_MS = 100.0
# deployments/ingress/health.py's message for a request waiting when its family went down
LOST_MARK = "while this request waited"


@dataclass(frozen=True)
class Row:
    row: str
    target: str
    measured: str
    passed: bool | None  # None: reported, nothing to pass

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def _answer_s(a: dict[str, Any]) -> float | None:
    return None if a["latency_ms"] is None else a["sent_s"] + a["latency_ms"] / 1000.0


def _gap(events: Sequence[tuple[float, float | None, bool]], t0: float) -> dict[str, Any]:
    """(sent, answered, good) events -> in seconds after t0 (None: none): the first bad answer
    after t0 (the failure seen), the first good answer to an event sent after that answer (the
    service back), and the send time of the last bad one."""
    after = [e for e in events if e[1] is not None and e[0] >= t0]
    bad = [e for e in after if not e[2]]
    if not bad:
        return {"first_bad_s": None, "first_good_after_s": None, "last_bad_sent_s": None}
    seen = min(e[1] for e in bad if e[1] is not None)
    good = [e[1] for e in after if e[2] and e[0] >= seen and e[1] is not None]
    return {"first_bad_s": seen - t0, "first_good_after_s": _rel(min(good), t0) if good else None,
            "last_bad_sent_s": max(e[0] for e in bad) - t0}


def _attainment(answers: list[dict[str, Any]], lo_s: float, hi_s: float,
                slo_ms: float) -> dict[str, Any]:
    chosen = [a for a in answers if lo_s <= a["sent_s"] < hi_s]
    met = sum(1 for a in chosen if a["outcome"] == "ok" and a["latency_ms"] <= slo_ms)
    ok = [a["latency_ms"] for a in chosen if a["outcome"] == "ok"]
    return {"sent": len(chosen), "met": met,
            "attainment": met / len(chosen) if chosen else None,
            "ok_p50_ms": percentile(ok, 50), "ok_p99_ms": percentile(ok, 99)}


def _health(probes: list[dict[str, Any]], route: str, t0: float) -> dict[str, Any]:
    mine = [p for p in probes if p["route"] == route]
    events = [(p["sent_s"], p["sent_s"] + (p["latency_ms"] or 0) / 1000.0,
               bool(p["healthy"]) and p["status"] == 200) for p in mine if p["status"]]
    states = Counter(str(p["state"]) for p in mine if p["sent_s"] >= t0)
    return {**_gap(events, t0), "reads": len(mine),
            "no_answer": sum(1 for p in mine if not p["status"]), "states_after_stop": states}


def _refusals(after_stop: list[dict[str, Any]], proxy_ms: dict[str, float]) -> dict[str, Any]:
    """The 503s after the stop: refusals (the family known down, or Serve's backpressure) and
    the requests that waited in the ingress when the family's last replica was lost; the
    refusals' latency as the client saw it and as the Serve proxy logged it."""
    lost = [a["latency_ms"] for a in after_stop
            if a["status"] == 503 and LOST_MARK in (a["error"] or "")]
    mine = [a for a in after_stop if a["status"] == 503 and LOST_MARK not in (a["error"] or "")]
    refused = [a["latency_ms"] for a in mine]
    at_proxy = [proxy_ms[a["request_id"]] for a in mine if a["request_id"] in proxy_ms]
    return {"n_refused": len(refused), "p50_refused_ms": percentile(refused, 50),
            "proxy_p99_refused_ms": percentile(at_proxy, 99),
            "proxy_max_refused_ms": max(at_proxy, default=None), "proxy_logged": len(at_proxy),
            "p99_refused_ms": percentile(refused, 99), "max_refused_ms": max(refused, default=None),
            "slow_refused": sum(1 for x in refused if x >= FAST_MS),
            "n_lost": len(lost), "p50_lost_ms": percentile(lost, 50),
            "max_lost_ms": max(lost, default=None)}


def figures(out: dict[str, Any]) -> dict[str, Any]:
    t0 = out["stop_s"]
    answers = out["answers"]
    ids = Counter(a["request_id"] for a in answers)
    after_stop = [a for a in answers if a["sent_s"] >= t0]
    gap = _gap([(a["sent_s"], _answer_s(a), a["status"] < 500) for a in answers if a["status"]],
               t0)
    back_s = gap["first_good_after_s"]
    served_again_abs = t0 + back_s if back_s is not None else out.get("recovered_s")
    lags = [lag for t, lag in out.get("client_loop_lags", []) if t >= t0]
    fig: dict[str, Any] = {
        "sent": len(answers), "answered": sum(1 for a in answers if a["status"]),
        "duplicate_ids": sum(n - 1 for n in ids.values() if n > 1),
        "id_mismatches": sum(1 for a in answers if a["status"] and a["echoed_id"] is not None
                             and a["echoed_id"] != a["request_id"]),
        "no_id_echoed": dict(Counter(a["status"] for a in answers
                                     if a["status"] and a["echoed_id"] is None)),
        "transport_errors": sum(1 for a in answers if a["outcome"] == "transport"),
        "timeouts": sum(1 for a in answers if a["outcome"] == "timeout"),
        "status_codes": dict(sorted(Counter(a["status"] for a in answers).items())),
        "after_stop": dict(sorted(Counter(f"{a['status']} {a['outcome']}"
                                          for a in after_stop).items())),
        "other_5xx": sum(1 for a in answers if a["status"] >= 500 and a["status"] != 503),
        **_refusals(after_stop, out.get("proxy_ms") or {}),
        "gap": gap, "healthz": _health(out["probes"], "/healthz", t0),
        "status_route": _health(out["probes"], "/v1/status", t0),
        "node_gone_s": _rel(out.get("node_gone_s"), t0),
        "placed_s": _rel(out.get("placed_s"), t0),
        "before": _attainment(answers, out["steady_start_s"], t0, out["slo_ms"]),
        "after": (_attainment(answers, served_again_abs, out["load_end_s"], out["slo_ms"])
                  if served_again_abs is not None else None),
        "client_lag_max_ms": max(lags, default=0.0),
    }
    fig["exactly_once"] = (fig["answered"] == fig["sent"] and not fig["duplicate_ids"]
                           and not fig["id_mismatches"])
    fig["fast_503"] = fig["p99_refused_ms"] is None or fig["p99_refused_ms"] < FAST_MS
    fig["passed"] = (fig["exactly_once"] and fig["other_5xx"] == 0 and fig["fast_503"]
                     and out.get("recovered_s") is not None)
    return fig


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} s"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f} ms"


def _att(a: dict[str, Any] | None) -> str:
    if not a or a["attainment"] is None:
        return "-"
    return (f"{100 * a['attainment']:.1f}% of {a['sent']} (ok p50 {_ms(a['ok_p50_ms'])}, "
            f"p99 {_ms(a['ok_p99_ms'])})")


def _gap_len(g: dict[str, Any]) -> float | None:
    if g["first_bad_s"] is None or g["first_good_after_s"] is None:
        return None
    return float(g["first_good_after_s"] - g["first_bad_s"])


def rows(fig: dict[str, Any], slo_ms: float) -> list[Row]:
    g, h, st = fig["gap"], fig["healthz"], fig["status_route"]
    codes = ", ".join(f"{k}: {v}" for k, v in fig["status_codes"].items())
    return [
        Row("every request answered once", "answered = sent, 0 conn errors/timeouts",
            f"{fig['answered']} of {fig['sent']} (duplicates {fig['duplicate_ids']}, "
            f"conn errors {fig['transport_errors']}, timeouts {fig['timeouts']}; ids: "
            f"{fig['id_mismatches']} wrong, not echoed on "
            + (", ".join(f"{n} x {k}" for k, n in fig["no_id_echoed"].items()) or "none") + ")",
            fig["exactly_once"]),
        Row("status codes", "no 5xx but 503", f"{codes} (other 5xx: {fig['other_5xx']})",
            fig["other_5xx"] == 0),
        Row("after the stop", "-", ", ".join(f"{k}: {v}" for k, v in fig["after_stop"].items()),
            None),
        Row("503 refusals while the family is down", f"fast: p99 < {FAST_MS:g} ms",
            f"{fig['n_refused']}: p50 {_ms(fig['p50_refused_ms'])}, p99 "
            f"{_ms(fig['p99_refused_ms'])}, max {_ms(fig['max_refused_ms'])} "
            f"({fig['slow_refused']} >= {FAST_MS:g} ms); at the proxy: p99 "
            f"{_ms(fig['proxy_p99_refused_ms'])}, max {_ms(fig['proxy_max_refused_ms'])} "
            f"({fig['proxy_logged']} logged)", fig["fast_503"]),
        Row("503 to requests waiting when the last replica went", "answered when seen down",
            f"{fig['n_lost']}: p50 {_ms(fig['p50_lost_ms'])}, max {_ms(fig['max_lost_ms'])}",
            None),
        Row("stop -> first 503 (family seen down)", "-", _s(g["first_bad_s"]), None),
        Row("gap: first 503 -> first 200 after it", "time to recover",
            f"{_s(_gap_len(g))} (stop -> first 200: {_s(g['first_good_after_s'])}; last 503 "
            f"sent at {_s(g['last_bad_sent_s'])})", None),
        Row("stop -> /healthz 200 again", "time to recover",
            f"{_s(h['first_good_after_s'])} (non-200 from {_s(h['first_bad_s'])}; "
            f"{h['no_answer']} reads unanswered)", None),
        Row("/v1/status: family healthy again", "shows the gap",
            f"{_s(st['first_good_after_s'])} (unhealthy from {_s(st['first_bad_s'])}; states "
            + ", ".join(f"{k} {v}" for k, v in st["states_after_stop"].items()) + ")", None),
        Row("stop -> node gone / replicas running again", "-",
            f"{_s(fig['node_gone_s'])} / {_s(fig['placed_s'])}", None),
        Row("attainment before (steady)", f"ok within {slo_ms:g} ms, of sent",
            _att(fig["before"]), None),
        Row("attainment after (from the first 200)", f"ok within {slo_ms:g} ms, of sent",
            _att(fig["after"]), None),
        Row("client event-loop lag after the stop", "-", f"max {_ms(fig['client_lag_max_ms'])}",
            None),
    ]


def table(rs: list[Row]) -> str:
    lines = ["| row | target | measured | pass |", "|---|---|---|---|"]
    for r in rs:
        mark = "-" if r.passed is None else ("yes" if r.passed else "NO")
        lines.append(f"| {r.row} | {r.target} | {r.measured} | {mark} |")
    return "\n".join(lines)


def plot(out: dict[str, Any], path: Path) -> None:
    """Each request's latency by send time (colour: status), /healthz status, the stop."""
    from bench.core.plot import pyplot, save

    plt = pyplot()

    t0 = out["stop_s"]
    fig, (ax, hx) = plt.subplots(2, 1, figsize=(9, 5), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 1]})
    by: dict[str, list[tuple[float, float]]] = {}
    for a in out["answers"]:
        key = f"{a['status']} {a['outcome']}" if a["status"] else a["outcome"]
        by.setdefault(key, []).append((a["sent_s"] - t0, a["latency_ms"] or 0.0))
    for key, pts in sorted(by.items()):
        ax.scatter(*zip(*pts, strict=True), s=6, label=f"{key} ({len(pts)})")
    ax.axhline(out["slo_ms"], color="grey", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    ax.legend(fontsize=7, loc="upper right")
    hz = [(p["sent_s"] - t0, p["status"]) for p in out["probes"] if p["route"] == "/healthz"]
    if hz:
        hx.step(*zip(*hz, strict=True), where="post")
    hx.set_ylabel("/healthz")
    hx.set_xlabel(f"seconds after node {out['stopped']} was stopped")
    for a_ in (ax, hx):
        a_.axvline(0, color="red", lw=0.8)
    save(fig, path, dpi=110)
