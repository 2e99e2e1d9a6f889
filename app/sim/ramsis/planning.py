"""Offline planning: RAMSIS policy tables and policy sets as versioned JSON files (cached)."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, replace
from pathlib import Path

from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import MDPSpec, Reward
from policies.model_selection.policy_set import generate_policy_set
from policies.model_selection.solve import solve
from policies.model_selection.table import PolicyTable
from policies.profile import LatencyModel

log = logging.getLogger(__name__)


def _spec_key(spec: MDPSpec, model: LatencyModel, iterations: int) -> str:
    fields = {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(spec).items()}
    if spec.reward is Reward.PER_DECISION:
        del fields["reward"]  # keys of tables cached before the reward option stay valid
    payload = {"spec": fields,
               "names": model.names, "acc": model.accuracy, "lat": model.latency_s,
               "iterations": iterations}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:20]


def plan_policy(spec: MDPSpec, model: LatencyModel, cache_dir: Path | None = None,
                iterations: int = 100) -> PolicyTable:
    """Build and solve one MDP, reusing a cached table when the inputs are identical."""
    path = None
    if cache_dir is not None:
        path = cache_dir / f"ramsis-{_spec_key(spec, model, iterations)}.json"
        if path.exists():
            return PolicyTable.from_dict(json.loads(path.read_text()))
    table = PolicyTable.from_solved(solve(build_mdp(spec, model), iterations), model.names)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(table.to_dict()))
        tmp.replace(path)
    return table


def plan_policy_set(base: MDPSpec, model: LatencyModel, min_qps: float, max_qps: float,
                    coarse_step_qps: float, cache_dir: Path | None = None,
                    max_accuracy_gap: float = 0.01, progress: bool = False) -> list[PolicyTable]:
    """Policies over [min_qps, max_qps] with adjacent expected accuracies within the gap."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"plan W={base.num_workers} SLO={base.slo_s * 1000:g}ms", unit="policy")

    def solve_at(load: float) -> PolicyTable:
        return plan_policy(replace(base, load_qps=load), model, cache_dir)

    tables = generate_policy_set(solve_at, min_qps, max_qps, coarse_step_qps, max_accuracy_gap,
                                 on_policy=(lambda _t: bar.update(1)) if bar is not None else None)
    if bar is not None:
        bar.close()
    return tables
