"""Figures and rows of the reliability benchmark's operational phases (kill_classifier,
kill_controller, slow_headers' connections, soak); pure. bench/experiments/reliability/report.py calls
these beside its own.

Answered exactly once: the load generator keeps one record per request sent; each must carry
an HTTP answer (no timeout, no connection error) that is a 200, a 4xx, or a 503 `unavailable`
(the fast refusal of a family with no live replica); any other 5xx is a failure. Times are
seconds since the phase's load started; the kill's time is on that clock too.

- kill_classifier: the 503 `unavailable` answers to the killed family's requests sent after the
  kill must be fast (p99 < TARGET_FAST_503_MS, each with Retry-After); time to recover is from
  the kill to the first 200 of that family (a request sent after the kill; the post-phase probe
  when the load saw none); the other families' attainment over requests sent in that gap.
- kill_controller: attainment over the phase; refusals, if any, and when /v1/status is back.
- soak: RSS of each group, mean over the last `window_s` vs the first after `warmup_s`.
"""

from __future__ import annotations

from typing import Any

from bench.core.stats import percentile
from bench.experiments.reliability.stats import (
    Rec,
    Row,
    Samples,
    answer_kind,
    att_text,
    attainment,
    done_s,
    kinds,
    window_mean,
    worst_drop_pts,
)

TARGET_FAST_503_MS = 100.0
TARGET_DROP_PTS = 5.0
TARGET_SOAK_GROWTH = 0.05
FAST_REFUSAL = "503 unavailable"
SETTLE_S = 0.5  # reported beside: the 503s sent this long after the kill (it is known by then)


def acceptable(kind: str) -> bool:
    """An answer the kill phases and the soak accept: 200, any 4xx, 503 `unavailable`."""
    return kind == "200" or kind.startswith("4") or kind == FAST_REFUSAL


def answered_once(recs: list[Rec]) -> dict[str, Any]:
    k = kinds(recs)
    return {"sent": len(recs), "answered": sum(1 for r in recs if r.get("status_code")),
            "kinds": k, "bad": {kind: n for kind, n in k.items() if not acceptable(kind)}}


def _all(p: dict[str, Any]) -> list[Rec]:
    return [r for recs in p["singles"].values() for r in recs]


def _first_poll(polls: list[list[Any]], after_s: float, pred: Any) -> float | None:
    return next((t for t, status, state in polls if t >= after_s and pred(status, state)), None)


def kill_classifier_figures(p: dict[str, Any], slo_ms: dict[str, float]) -> dict[str, Any]:
    kill = p["kill"]
    fam, k = kill["family"], float(kill["kill_s"])
    fam_recs = p["singles"].get(fam, [])
    refused = [r for r in fam_recs if answer_kind(r) == FAST_REFUSAL]
    gap = [r for r in refused if r["sent_s"] >= k]
    in_flight = [r for r in refused if r["sent_s"] < k]
    lat = [float(r["latency_ms"]) for r in gap]
    settled = [float(r["latency_ms"]) for r in gap if r["sent_s"] >= k + SETTLE_S]
    oks = [d for r in fam_recs if answer_kind(r) == "200" and r["sent_s"] >= k
           and (d := done_s(r)) is not None]
    recover = (min(oks) - k, "load") if oks else (kill.get("probe_ok_after_kill_s"), "probe")
    end = k + recover[0] if recover[0] is not None else float(p["single_s"])
    others = {f: [r for r in recs if k <= r["sent_s"] <= end]
              for f, recs in p["singles"].items() if f != fam}
    down = _first_poll(kill["polls"], k, lambda st, state: state in ("down", "unavailable"))
    up = _first_poll(kill["polls"], down if down is not None else k,
                     lambda st, state: down is not None and state == "up")
    return {"family": fam, "kill_s": k, "once": answered_once(_all(p)),
            "gap_503": len(gap), "gap_503_p50_ms": percentile(lat, 50),
            "gap_503_p95_ms": percentile(lat, 95), "gap_503_p99_ms": percentile(lat, 99), "gap_503_max_ms": max(lat, default=None),
            "settled_503_p99_ms": percentile(settled, 99),
            "gap_503_retry_after": sum(1 for r in gap if r.get("retry_after_s")),
            "in_flight_503": len(in_flight),
            "in_flight_503_max_ms": max((r["latency_ms"] for r in in_flight), default=None),
            "recover_s": recover[0], "recovered_by": recover[1] if recover[0] is not None else None,
            "gap_s": end - k, "others_gap_attainment": attainment(others, slo_ms, end - k),
            "healthz_down_s": None if down is None else down - k,
            "healthz_up_s": None if up is None else up - k}


def kill_controller_figures(p: dict[str, Any]) -> dict[str, Any]:
    kill = p["kill"]
    k = float(kill["kill_s"])
    recs = _all(p)
    refused = [d for r in recs if answer_kind(r) != "200" and (d := done_s(r)) is not None
               and d >= k]
    down = _first_poll(kill["polls"], k, lambda st, state: st != 200)
    back = _first_poll(kill["polls"], down if down is not None else k,
                       lambda st, state: down is not None and st == 200)
    if back is None and down is not None:
        back = kill.get("probe_ok_after_kill_s")
        back = None if back is None else back + k
    return {"kill_s": k, "once": answered_once(recs), "not_200": len(refused),
            "first_not_200_s": None if not refused else min(refused) - k,
            "last_not_200_s": None if not refused else max(refused) - k,
            "status_down_s": None if down is None else down - k,
            "status_back_s": None if back is None else back - k}


def soak_figures(p: dict[str, Any], samples: Samples) -> dict[str, Any]:
    soak = p["soak"]
    t0, dur = float(p["load_start_s"]), float(p["single_s"])
    warm, win = float(soak["warmup_s"]), float(soak["window_s"])
    first = window_mean(samples, t0 + warm, t0 + warm + win)
    last = window_mean(samples, t0 + dur - win, t0 + dur)
    growth = {g: last[g] / v - 1.0 for g, v in first.items() if v > 0 and g in last}
    return {**soak, "once": answered_once(_all(p)), "rss_first_mib": first,
            "rss_last_mib": last, "rss_growth": growth}


def slow_header_summary(answers: list[dict[str, Any]], give_up_s: float) -> dict[str, Any]:
    """What the slow-header connections got: answers by status, how many the server closed
    and when, how many were still open when the clients gave up (and closed them)."""
    codes: dict[str, int] = {}
    for a in answers:
        if a["status"] is not None:
            codes[str(a["status"])] = codes.get(str(a["status"]), 0) + 1
    closed = sorted(a["closed_s"] for a in answers if a["closed"] and a.get("closed_s") is not None)
    return {"clients": len(answers), "status_codes": dict(sorted(codes.items())),
            "connect_errors": sum(1 for a in answers if str(a.get("error") or "").startswith(
                "connect")),
            "server_closed": len(closed), "server_closed_s_median": percentile(closed, 50),
            "server_closed_s_max": closed[-1] if closed else None,
            "open_at_give_up": sum(1 for a in answers if not a["closed"] and a["status"] is None
                                   and not str(a.get("error") or "").startswith("connect")),
            "give_up_s": give_up_s,
            "header_bytes_max": max((a["sent_bytes"] for a in answers), default=0)}


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f} ms"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f} s"


def once_row(name: str, once: dict[str, Any]) -> Row:
    kinds_text = ", ".join(f"{k}: {n}" for k, n in once["kinds"].items())
    return Row(f"{name}: answered once", "each sent request 1 answer; no 5xx but 503 unavailable",
               f"{once['sent']} sent, {once['answered']} answered ({kinds_text})",
               once["sent"] > 0 and once["sent"] == once["answered"] and not once["bad"])


def kill_classifier_rows(f: dict[str, Any], quiet_att: dict[str, float | None]) -> list[Row]:
    fam, n = f["family"], f["gap_503"]
    p99 = f["gap_503_p99_ms"]
    fast = None if n == 0 else (p99 is not None and p99 < TARGET_FAST_503_MS
                                and f["gap_503_retry_after"] == n)
    drop = worst_drop_pts({k: v for k, v in quiet_att.items() if k != fam},
                          f["others_gap_attainment"])
    return [
        once_row("kill_classifier", f["once"]),
        Row("kill_classifier: 503 in the gap", f"p99 < {TARGET_FAST_503_MS:g} ms, Retry-After",
            f"{fam}: {n} x 503 unavailable sent after the kill, p50 {_ms(f['gap_503_p50_ms'])},"
            f" p95 {_ms(f['gap_503_p95_ms'])}, p99 {_ms(p99)}, max {_ms(f['gap_503_max_ms'])}; Retry-After on "
            f"{f['gap_503_retry_after']}; sent {SETTLE_S:g} s or more after the kill: p99 "
            f"{_ms(f['settled_503_p99_ms'])}; in flight at the kill: {f['in_flight_503']} x 503 "
            f"(max {_ms(f['in_flight_503_max_ms'])})", fast),
        Row("kill_classifier: time to recover", "kill -> first 200 of the family",
            f"{_s(f['recover_s'])} (seen by the {f['recovered_by'] or '-'}); /healthz "
            f"{fam} down at {_s(f['healthz_down_s'])}, up at {_s(f['healthz_up_s'])}",
            f["recover_s"] is not None),
        Row("kill_classifier: other families in the gap", f"<= {TARGET_DROP_PTS:g} pts below "
            "quiet", f"{att_text(f['others_gap_attainment'])} over {f['gap_s']:.1f} s (worst "
            f"drop {'-' if drop is None else f'{drop:.1f}'} pts)",
            None if drop is None else drop <= TARGET_DROP_PTS),
    ]


def kill_controller_rows(f: dict[str, Any], att: dict[str, float | None],
                         quiet_att: dict[str, float | None]) -> list[Row]:
    drop = worst_drop_pts(quiet_att, att)
    refused = ("nothing but 200" if not f["not_200"] else
               f"{f['not_200']} not 200, answered {_s(f['first_not_200_s'])} to "
               f"{_s(f['last_not_200_s'])} after the kill")
    return [
        once_row("kill_controller", f["once"]),
        Row("kill_controller: attainment", f"<= {TARGET_DROP_PTS:g} pts below quiet",
            f"{att_text(att)} (worst drop {'-' if drop is None else f'{drop:.1f}'} pts)",
            None if drop is None else drop <= TARGET_DROP_PTS),
        Row("kill_controller: time to recover", "controller back (/v1/status 200)",
            f"{refused}; /v1/status not 200 from {_s(f['status_down_s'])}, 200 again at "
            f"{_s(f['status_back_s'])}", f["status_down_s"] is None or
            f["status_back_s"] is not None),
    ]


def slow_header_row(f: dict[str, Any]) -> Row:
    codes = ", ".join(f"{k}: {v}" for k, v in f["status_codes"].items()) or "none"
    return Row("slow_headers: the slow connections", "reported (no target set)",
               f"answers {codes}; closed by the server {f['server_closed']}/{f['clients']}"
               f" (median {_s(f['server_closed_s_median'])}, last "
               f"{_s(f['server_closed_s_max'])}); open when the clients gave up at "
               f"{f['give_up_s']:g} s: {f['open_at_give_up']}; connect errors "
               f"{f['connect_errors']}", None)


def soak_rows(f: dict[str, Any], att: dict[str, float | None]) -> list[Row]:
    cap = f.get("capacity_qps")
    rate = f"{f['qps']:.1f} req/s" + ("" if cap is None else f" = {f['qps'] / cap:.2f} x {cap:.1f}")
    growth = f["rss_growth"]
    text = ", ".join(f"{g} {f['rss_first_mib'][g]:.0f} -> {f['rss_last_mib'][g]:.0f} MiB "
                     f"({100 * v:+.1f}%)" for g, v in growth.items())
    return [
        once_row("soak", f["once"]),
        Row("soak: attainment", "reported", f"{att_text(att)} at {rate}", None),
        Row("soak: RSS growth", f"< {100 * TARGET_SOAK_GROWTH:g}% (last {f['window_s']:g} s vs "
            f"first after {f['warmup_s']:g} s)", text or "no samples",
            bool(growth) and all(v < TARGET_SOAK_GROWTH for v in growth.values())),
    ]
