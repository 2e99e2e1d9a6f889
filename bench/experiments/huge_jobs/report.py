"""Figures, checks, table and plot of the huge-jobs benchmark (bench/experiments/huge_jobs/run.py), from
its records; pure apart from writing the PNG.

Per job phase and family: attainment (ok within the family's SLO, of sent: a refusal counts as
a miss) of the single requests sent while jobs were in flight (from the phase's start to the
last job's answer) against the quiet phase's, in points (target: other families lose at most
5); after the last answer, the same for the requests sent then. Per job phase: the jobs'
outcomes (items ok / deadline_exceeded / shed, jobs refused, 413s), the over-cap job's answer,
and how long the job family's classifier kept working after the last job was answered (its CPU
rate above its quiet rate by more than BUSY_CORES) and the CPU seconds it spent doing so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.sim.replica.request_metrics import RequestRecord, is_satisfied, summarize

TARGET_DROP_PTS = 5.0
BUSY_CORES = 0.2  # CPU rate above the quiet one that counts as still working
BIN_S = 2.0  # the plot's attainment bins
REPLICA_PREFIX = "ServeReplica:adaptserve:"
Samples = Sequence[tuple[float, dict[str, float]]]


def _records(phase: dict[str, Any], family: str) -> list[tuple[float, RequestRecord]]:
    """(wall-clock send time, record) of a phase's single requests to `family`."""
    return [(phase["origin_s"] + r["sent_s"], RequestRecord(**r))
            for r in phase["singles"].get(family, [])]


def window(recs: list[tuple[float, RequestRecord]], lo_s: float, hi_s: float,
           slo_ms: float) -> dict[str, Any]:
    """Attainment of the requests sent in [lo_s, hi_s) (wall clock)."""
    chosen = [r for t, r in recs if lo_s <= t < hi_s]
    if not chosen:
        return {"sent": 0, "attainment": None}
    s = summarize(chosen, max(hi_s - lo_s, 1e-3), slo_ms)
    return {"sent": s.sent, "satisfied": s.satisfied, "attainment": s.slo_attainment,
            "attainment_admitted": s.slo_attainment_admitted, "refused": s.refused,
            "deadline_exceeded": s.deadline_exceeded, "shed": s.shed,
            "errors": s.errors + s.timeouts, "p99_ms": s.latency_p99_ms}


def job_summary(jobs: list[dict[str, Any]], over_cap: dict[str, Any] | None) -> dict[str, Any]:
    items: dict[str, int] = {}
    for j in jobs:
        for k, v in j["outcomes"].items():
            items[k] = items.get(k, 0) + v
    answered = [j for j in jobs if j["status_code"] == 200]
    codes: dict[str, int] = {}
    for j in jobs:
        codes[str(j["status_code"])] = codes.get(str(j["status_code"]), 0) + 1
    lat = [j["answered_s"] - j["sent_s"] for j in answered]
    return {"jobs": len(jobs), "status_codes": codes, "items": items,
            "answered_p50_s": float(np.median(lat)) if lat else None,
            "answered_max_s": max(lat) if lat else None,
            "over_cap": None if over_cap is None else
            {"status_code": over_cap["status_code"], "error_type": over_cap["error_type"],
             "items": over_cap["items"]}}


def cpu_rates(samples: Samples, actor: str) -> list[tuple[float, float, float]]:
    """(start, end, cores) per sampling interval of one process."""
    out = []
    for (t0, a), (t1, b) in zip(samples, samples[1:], strict=False):
        if actor in a and actor in b and t1 > t0:
            out.append((t0, t1, max(0.0, b[actor] - a[actor]) / (t1 - t0)))
    return out


def busy_after(rates: list[tuple[float, float, float]], quiet: tuple[float, float],
               since_s: float, until_s: float) -> dict[str, float | None]:
    """How long after `since_s` the process ran above its quiet rate + BUSY_CORES (end of its
    last such interval), and the CPU seconds above its quiet rate until `until_s`."""
    base = [c for a, b, c in rates if a >= quiet[0] and b <= quiet[1]]
    if not base:
        return {"quiet_cores": None, "busy_after_s": None, "extra_cpu_s": None}
    base_cores = float(np.mean(base))
    after = [(a, b, c) for a, b, c in rates if b > since_s and a < until_s]
    busy = [b for a, b, c in after if c > base_cores + BUSY_CORES]
    extra = sum(max(0.0, c - base_cores) * (min(b, until_s) - max(a, since_s))
                for a, b, c in after)
    return {"quiet_cores": base_cores, "busy_after_s": max(busy) - since_s if busy else 0.0,
            "extra_cpu_s": extra}


def phase_figures(p: dict[str, Any], quiet: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    settings, slo = out["settings"], out["limits"]["slo_ms"]
    end_s = p["origin_s"] + p["single_s"]
    answers = [j["answered_s"] for j in p["jobs"]]
    last_s = max(answers) if answers else p["jobs_until_s"]
    families = {}
    for f in settings["single_families"]:
        recs = _records(p, f)
        during = window(recs, p["origin_s"], last_s, slo[f])
        base = quiet["families"][f]["attainment"]
        drop = (None if base is None or during["attainment"] is None
                else 100.0 * (base - during["attainment"]))
        families[f] = {"during": during, "after": window(recs, last_s, end_s, slo[f]),
                       "drop_pts": drop, "other_family": f != settings["job_family"]}
    actor = f"{REPLICA_PREFIX}Classifier_{settings['job_family']}"
    busy = busy_after(cpu_rates(out["cpu_samples"], actor), quiet["window"], last_s, end_s)
    return {"name": p["name"], "kind": p["kind"], "job_slo_ms": p["job_slo_ms"],
            "job_items": p["job_items"], "last_answer_s": last_s - p["origin_s"],
            "max_send_lag_ms": p["max_send_lag_ms"], "families": families,
            "jobs": job_summary(p["jobs"], p["over_cap"]), "job_family_cpu": busy}


def figures(out: dict[str, Any]) -> dict[str, Any]:
    """The report's figures and checks from a whole run (records included)."""
    phases = {p["name"]: p for p in out["phases"]}
    q = phases["quiet"]
    qwin = (q["origin_s"], q["origin_s"] + q["single_s"])
    quiet = {"window": qwin, "families": {
        f: window(_records(q, f), *qwin, out["limits"]["slo_ms"][f])
        for f in out["settings"]["single_families"]}}
    per_phase = [phase_figures(p, quiet, out) for p in out["phases"] if p["kind"] is not None]
    return {"quiet": quiet["families"], "phases": per_phase, "checks": checks(per_phase),
            "timeline": timeline(out)}


def checks(per_phase: list[dict[str, Any]]) -> dict[str, bool | None]:
    res: dict[str, bool | None] = {}
    for p in per_phase:
        for f, x in p["families"].items():
            if x["other_family"]:
                res[f"{p['name']}/{f} drop<={TARGET_DROP_PTS:g}pts"] = (
                    None if x["drop_pts"] is None else bool(x["drop_pts"] <= TARGET_DROP_PTS))
        over = p["jobs"]["over_cap"]
        res[f"{p['name']} over-cap job 413"] = (None if over is None else bool(
            over["status_code"] == 413 and over["error_type"] == "job_too_large"))
    return res


def timeline(out: dict[str, Any]) -> dict[str, Any]:
    """Attainment per BIN_S of each family and CPU cores per process, seconds since the
    quiet phase began; each job phase's span (start, clients stop, last answer)."""
    runs = [p for p in out["phases"] if p["name"] != "warmup"]
    t0, t1 = runs[0]["origin_s"], max(p["origin_s"] + p["single_s"] for p in runs)
    nbins = int(math.ceil((t1 - t0) / BIN_S))
    att: dict[str, list[float | None]] = {}
    for f in out["settings"]["single_families"]:
        sent, good = np.zeros(nbins), np.zeros(nbins)
        for p in runs:
            for t, r in _records(p, f):
                b = min(nbins - 1, max(0, int((t - t0) // BIN_S)))
                sent[b] += 1
                good[b] += is_satisfied(r, out["limits"]["slo_ms"][f])
        att[f] = [float(g / n) if n else None for g, n in zip(good, sent, strict=True)]
    actors = sorted({a for _, s in out["cpu_samples"] for a in s} - {"driver"})
    cpu = {a.removeprefix(REPLICA_PREFIX): [(0.5 * (a0 + b0) - t0, c)
                                            for a0, b0, c in cpu_rates(out["cpu_samples"], a)]
           for a in actors}
    spans = [{"name": p["name"], "start_s": p["origin_s"] - t0,
              "clients_stop_s": p["jobs_until_s"] - t0,
              "last_answer_s": max([j["answered_s"] for j in p["jobs"]] or [p["jobs_until_s"]])
              - t0} for p in runs if p["kind"] is not None]
    return {"bin_s": BIN_S, "attainment": att, "cpu_cores": cpu, "job_spans": spans}


def _pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def table(fig: dict[str, Any]) -> str:
    head = (f"{'phase':<15}{'family':<8}{'window':<8}{'sent':>6}{'att%':>7}{'adm%':>7}"
            f"{'refused':>8}{'dl_exc':>7}{'shed':>6}{'err':>5}{'p99ms':>7}{'drop':>7}")
    lines = [head]

    def row(phase: str, f: str, name: str, w: dict[str, Any], drop: float | None) -> None:
        if not w["sent"]:
            lines.append(f"{phase:<15}{f:<8}{name:<8}{0:>6}")
            return
        lines.append(f"{phase:<15}{f:<8}{name:<8}{w['sent']:>6}{_pct(w['attainment']):>7}"
                     f"{_pct(w['attainment_admitted']):>7}{w['refused']:>8}"
                     f"{w['deadline_exceeded']:>7}{w['shed']:>6}{w['errors']:>5}"
                     f"{w['p99_ms']:>7.0f}{'' if drop is None else f'{drop:.1f}':>7}")

    for f, w in fig["quiet"].items():
        row("quiet", f, "all", w, None)
    for p in fig["phases"]:
        for f, x in p["families"].items():
            row(p["name"], f, "during", x["during"], x["drop_pts"])
            row(p["name"], f, "after", x["after"], None)
    lines += ["", f"{'phase':<15}{'items':>6}{'jobs':>6}  {'HTTP codes':<22}{'items ok/dl/shed':<20}"
              f"{'p50_s':>6}{'max_s':>6}  {'over-cap':<18}{'busy_after_s':>13}{'extra_cpu_s':>12}"]
    for p in fig["phases"]:
        j, cpu, it = p["jobs"], p["job_family_cpu"], p["jobs"]["items"]
        codes = " ".join(f"{k}:{v}" for k, v in sorted(j["status_codes"].items()))
        oks = f"{it.get('ok', 0)}/{it.get('deadline_exceeded', 0)}/{it.get('shed', 0)}"
        over = j["over_cap"] or {}
        lines.append(
            f"{p['name']:<15}{p['job_items']:>6}{j['jobs']:>6}  {codes:<22}{oks:<20}"
            f"{_num(j['answered_p50_s']):>6}{_num(j['answered_max_s']):>6}  "
            f"{str(over.get('status_code')) + ' ' + str(over.get('error_type')):<18}"
            f"{_num(cpu['busy_after_s']):>13}{_num(cpu['extra_cpu_s']):>12}")
    lines += ["", "checks: " + ", ".join(f"{k} {v}" for k, v in fig["checks"].items())]
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def plot(fig: dict[str, Any], title: str, path: Path) -> None:
    """Attainment per family over time, CPU per Serve process, drop per phase and family."""
    from bench.core.plot import pyplot, save

    plt = pyplot()

    tl = fig["timeline"]
    f, (ax_a, ax_c, ax_d) = plt.subplots(3, 1, figsize=(11, 10))
    for fam, att in tl["attainment"].items():
        ax_a.plot([tl["bin_s"] * (i + 0.5) for i in range(len(att))],
                  [np.nan if a is None else 100 * a for a in att], label=fam)
    for ax in (ax_a, ax_c):
        for s in tl["job_spans"]:
            ax.axvspan(s["start_s"], s["last_answer_s"], color="0.88")
    for s in tl["job_spans"]:
        ax_a.text(s["start_s"], 2, s["name"], fontsize=7)
    keep = [a for a in tl["cpu_cores"] if a.startswith(("Classifier", "Ingress", "Proxy"))
            or a == "machine"]
    for actor in keep:
        pts = tl["cpu_cores"][actor]
        ax_c.plot([t for t, _ in pts], [c for _, c in pts], label=actor, lw=0.9)
    ax_a.set(ylabel=f"ok within SLO, of sent (%, {tl['bin_s']:g} s bins)", ylim=(0, 105))
    ax_c.set(xlabel="s since the quiet phase began (grey: jobs in flight)", ylabel="CPU cores")
    names = [p["name"] for p in fig["phases"]]
    fams = list(fig["quiet"])
    width = 0.8 / max(len(fams), 1)
    for i, fam in enumerate(fams):
        drops = [p["families"][fam]["drop_pts"] for p in fig["phases"]]
        ax_d.bar(np.arange(len(names)) + i * width, [np.nan if d is None else d for d in drops],
                 width, label=fam)
    ax_d.axhline(TARGET_DROP_PTS, color="red", lw=0.8, label=f"{TARGET_DROP_PTS:g} pts")
    ax_d.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=8)
    ax_d.set(ylabel="attainment lost vs quiet (pts)")
    for ax in (ax_a, ax_c, ax_d):
        ax.legend(fontsize=7, loc="upper right")
    f.suptitle(title, fontsize=10)
    save(f, path, dpi=100)
