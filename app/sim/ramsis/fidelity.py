"""RAMSIS §7.3.1: expected (§5.1) vs simulated accuracy and violations at constant loads."""

from __future__ import annotations

from typing import Any

from app.sim.ramsis.experiments import Scenario, run_scenario
from policies.profile import LatencyModel


def run_fidelity(model: LatencyModel, slo_s: float, workers: list[int], loads: list[float],
                 duration_s: float = 30.0) -> list[dict[str, Any]]:
    rows = []
    for w in workers:
        for q in loads:
            s = Scenario(slo_s, w, "constant", qps=q, duration_s=duration_s, policies=("ramsis",))
            r = run_scenario(s, model)["results"]["ramsis"]
            rows.append({"workers": w, "qps": q, "expected_accuracy": r["expected_accuracy"],
                         "simulated_accuracy": r["accuracy_per_satisfied"],
                         "expected_violation": r["expected_violation"],
                         "simulated_violation": r["violation_rate"],
                         "gap_points": 100 * (r["accuracy_per_satisfied"] - r["expected_accuracy"])})
    return rows


def fidelity_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'W':>4}{'QPS':>7}{'E[acc]':>9}{'sim acc':>9}{'gap pt':>8}{'E[viol]%':>10}{'sim viol%':>10}"]
    for r in rows:
        lines.append(f"{r['workers']:>4}{r['qps']:>7.0f}{100 * r['expected_accuracy']:>9.2f}"
                     f"{100 * r['simulated_accuracy']:>9.2f}{r['gap_points']:>8.2f}"
                     f"{100 * r['expected_violation']:>10.3f}{100 * r['simulated_violation']:>10.3f}")
    return "\n".join(lines)
