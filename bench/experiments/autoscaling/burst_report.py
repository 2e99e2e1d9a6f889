"""What the autoscaling burst demonstration shows (bench/experiments/autoscaling/burst_run.py): replicas and load
per stage over time, the checks (encoders up in the burst and back down after, the LLM stage
put, every request answered exactly once), a table, the figure, and the run as a history for
the next start (policies/autoscaling/history.py)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.core.stream_client import GenRecord
from bench.experiments.autoscaling.burst import BurstSpec
from policies.autoscaling import History

ENC, LLM = "ImageEncoder", "LLMBackend"


def stage_point(sample: dict[str, Any], name: str) -> dict[str, Any]:
    states = (sample.get("replicas") or {}).get(name) or {}
    d = (sample.get("decisions") or {}).get(name) or {}
    return {"running": states.get("RUNNING", 0),
            "starting": sum(v for k, v in states.items() if k not in ("RUNNING", "STOPPING")),
            "target": d.get("target"), "desired": d.get("desired"),
            "load_per_s": d.get("load_per_s"), "reason": d.get("reason")}


def series(samples: Sequence[dict[str, Any]], spec: BurstSpec) -> list[dict[str, Any]]:
    return [{"t_s": s["t_s"], "phase": spec.phase(s["t_s"]), "encoder": stage_point(s, ENC),
             "llm": stage_point(s, LLM)} for s in samples if "replicas" in s and s["t_s"] >= 0]


def sent_load(records: Sequence[GenRecord], spec: BurstSpec, tokens_per_image: int,
              bin_s: float = 5.0) -> list[dict[str, float]]:
    """What the client sent per bin: requests/s and image tokens/s."""
    n = int(spec.duration_s // bin_s) + 1
    reqs, toks = [0] * n, [0] * n
    for r in records:
        i = min(n - 1, int(r.scheduled_s // bin_s))
        reqs[i] += 1
        toks[i] += r.num_images * tokens_per_image
    return [{"t_s": i * bin_s, "rps": reqs[i] / bin_s, "image_tokens_per_s": toks[i] / bin_s}
            for i in range(n)]


def _peak(rows: Sequence[dict[str, Any]], stage: str, key: str, phase: str) -> int:
    return max((r[stage][key] or 0 for r in rows if r["phase"] == phase), default=0)


def checks(rows: Sequence[dict[str, Any]], records: Sequence[GenRecord],
           answered_by_server: int) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    quiet = [r for r in rows if r["phase"] == "quiet"]
    last = quiet[-1] if quiet else (rows[-1] if rows else None)
    llm_seen = [r["llm"] for r in rows]
    out: dict[str, Any] = {
        "sent": len(records), "client_statuses": statuses,
        "answered_by_server": answered_by_server,
        "every_request_answered_once": answered_by_server == len(records) and sum(
            statuses.values()) == len(records),
        "encoder_peak_target_in_burst": _peak(rows, "encoder", "target", "burst"),
        "encoder_peak_running_in_burst": _peak(rows, "encoder", "running", "burst"),
        "encoder_peak_running": max((r["encoder"]["running"] for r in rows), default=0),
        "encoder_running_at_end": None if last is None else last["encoder"]["running"],
        "encoder_target_at_end": None if last is None else last["encoder"]["target"],
        "llm_running_min_max": [min((x["running"] for x in llm_seen), default=0),
                                max((x["running"] for x in llm_seen), default=0)],
        "llm_targets": sorted({x["target"] for x in llm_seen if x["target"] is not None}),
    }
    start = rows[0]["encoder"]["running"] if rows else 0
    out["encoders_scaled_up_in_burst"] = out["encoder_peak_running_in_burst"] > start
    out["encoders_back_down_after"] = last is not None and last["encoder"]["running"] == start \
        and last["encoder"]["target"] == start
    out["llm_stayed_put"] = out["llm_running_min_max"][0] == out["llm_running_min_max"][1] \
        and len(out["llm_targets"]) <= 1
    out["passed"] = all(out[k] for k in ("every_request_answered_once",
                                         "encoders_scaled_up_in_burst",
                                         "encoders_back_down_after", "llm_stayed_put"))
    return out


def table(rows: Sequence[dict[str, Any]], every_s: float = 10.0) -> str:
    head = ("| t s | phase | encoder load tok/s | encoders running (starting) / target | reason "
            "| LLM load tok/s | LLM running / target |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    next_t = 0.0
    for r in rows:
        if r["t_s"] + 1e-9 < next_t:
            continue
        next_t = r["t_s"] + every_s
        e, m = r["encoder"], r["llm"]
        lines.append(f"| {r['t_s']:.0f} | {r['phase']} | {e['load_per_s'] or 0:.0f} | "
                     f"{e['running']} ({e['starting']}) / {e['target']} | {e['reason']} | "
                     f"{m['load_per_s'] or 0:.0f} | {m['running']} / {m['target']} |")
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], sent: Sequence[dict[str, float]], spec: BurstSpec,
         path: Any, title: str) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()

    t = [r["t_s"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for stage, label, style in (("encoder", "encoders", "-"), ("llm", "LLM", "-")):
        ax1.step(t, [r[stage]["running"] for r in rows], style, where="post",
                 label=f"{label} running")
        ax1.step(t, [r[stage]["target"] or 0 for r in rows], "--", where="post",
                 label=f"{label} target")
    ax1.set_ylabel("replicas")
    ax1.legend(loc="upper right", fontsize=8)
    ax2.plot([s["t_s"] for s in sent], [s["image_tokens_per_s"] for s in sent], drawstyle=
             "steps-post", label="image tokens/s sent (client)")
    ax2.plot(t, [r["encoder"]["load_per_s"] or 0 for r in rows], label="encoder load (policy)")
    ax2.plot(t, [r["llm"]["load_per_s"] or 0 for r in rows],
             label="LLM load (policy: text + delivered image tokens)")
    ax2.set_ylabel("tokens/s")
    ax2.set_xlabel("time (s)")
    ax2.legend(loc="upper right", fontsize=8)
    for ax in (ax1, ax2):
        ax.axvspan(spec.warm_s, spec.warm_s + spec.burst_s, color="0.9", zorder=0)
    fig.suptitle(title, fontsize=10)
    save(fig, path, dpi=120)


def history_of(records: Sequence[GenRecord], tokens_per_image: int,
               encode_latency_s: float | None, window_s: float = 5.0) -> History | None:
    """The run as a History (one sample per window with traffic), for the next start's
    initial sizes; None without an encode latency."""
    if encode_latency_s is None or not records:
        return None
    windows: dict[int, list[GenRecord]] = {}
    for r in records:
        windows.setdefault(int(r.scheduled_s // window_s), []).append(r)
    texts = [r.prompt_tokens - r.num_images * tokens_per_image for r in records
             if r.prompt_tokens is not None]
    return History(
        image_qps=[sum(r.num_images for r in w) / window_s for w in windows.values()],
        encode_latency_s=[encode_latency_s],
        request_qps=[len(w) / window_s for w in windows.values()],
        images_per_request=[statistics.mean(r.num_images for r in w) for w in windows.values()],
        text_tokens_per_request=[float(statistics.median(texts))] if texts else [0.0])
