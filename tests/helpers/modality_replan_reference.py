"""The MOSEL re-plan as it was before the packed-array rewrite (commit 515fbce,
policies/modality/replan.py): the oracle for test_modality_replan_equivalence.py. Kept
verbatim (minus the dataclasses, which did not change and are imported) so the new code is
checked against the old decisions, not against a re-derivation of them."""

from __future__ import annotations

import bisect

import numpy as np
import numpy.typing as npt

from policies.modality.api import (
    DropReason,
    JobAssignment,
    JobDrop,
    ModalityQueueSnapshot,
    ModalityTables,
    QueuePlan,
    ReplanJob,
    ReplanOutcome,
)

DEADLINE_EPS_S = 1e-9


def drop_pass(start_s: float, jobs: list[ReplanJob]) -> tuple[list[int], list[int]]:
    """Positions kept / dropped: a job is dropped iff it misses at all-fastest (see module)."""
    t, kept, dropped = start_s, [], []
    for pos, job in enumerate(jobs):
        if not job.candidates:
            dropped.append(pos)
            continue
        end = t + job.candidates[0].latency_s
        if end > job.deadline_s + DEADLINE_EPS_S:
            dropped.append(pos)
        else:
            kept.append(pos)
            t = end
    return kept, dropped


def drop_fewest(start_s: float, jobs: list[ReplanJob],
                max_jobs: int = 64) -> tuple[list[int], list[int]]:
    """Positions kept / dropped dropping the fewest requests (kept jobs at their fastest
    SLO-meeting strategy, EDF order; see module). Exact: the Lawler-Moore DP for
    1||sum w_j U_j with w = job size, over dropped requests d <= what `drop_pass` drops;
    among equal d, the drop set whose kept jobs end earliest. Only the jobs up to the last
    one late with nothing dropped can matter. Above `max_jobs` such jobs, `drop_pass`."""
    kept, dropped = drop_pass(start_s, jobs)
    sizes = [j.candidates[0].num_requests if j.candidates else 0 for j in jobs]
    width = sum(sizes[p] for p in dropped) + 1  # drop_pass's choice bounds the optimum
    t, stages = start_s, 0
    for k, job in enumerate(jobs):
        if job.candidates:
            t += job.candidates[0].latency_s
            stages = k + 1 if t > job.deadline_s + DEADLINE_EPS_S else stages
    if width == 1 or stages > max_jobs:
        return kept, dropped
    finish = np.full(width, np.inf)  # finish[d]: earliest end dropping exactly d requests
    finish[0] = start_s
    keep, skip = np.empty(width), np.empty(width)
    dropped_at = np.ones((stages, width), dtype=np.bool_)
    for k in range(stages):
        job, n = jobs[k], sizes[k]
        if not job.candidates:
            continue  # accuracy-infeasible: always dropped, costs no time
        np.add(finish, job.candidates[0].latency_s, out=keep)
        keep[keep > job.deadline_s + DEADLINE_EPS_S] = np.inf
        skip[:n] = np.inf
        skip[n:] = finish[:max(width - n, 0)]
        np.less(skip, keep, out=dropped_at[k])
        np.minimum(keep, skip, out=finish)
    d = int(np.argmax(np.isfinite(finish)))
    kept = [p for p in range(stages, len(jobs)) if jobs[p].candidates]
    dropped = [p for p in range(stages, len(jobs)) if not jobs[p].candidates]
    for k in range(stages - 1, -1, -1):
        if dropped_at[k, d]:
            dropped.append(k)
            d -= sizes[k]
        else:
            kept.append(k)
    return sorted(kept), sorted(dropped)


def is_feasible(start_s: float, jobs: list[ReplanJob], choices: list[int]) -> bool:
    t = start_s
    for job, c in zip(jobs, choices, strict=True):
        t += job.candidates[c].latency_s
        if t > job.deadline_s + DEADLINE_EPS_S:
            return False
    return True


def replan_exact(start_s: float, jobs: list[ReplanJob],
                 max_nodes: int = 20000) -> list[int] | None:
    """Optimal choices by depth-first branch and bound; None if the node budget runs out."""
    n = len(jobs)
    best_after = [0.0] * (n + 1)
    for k in range(n - 1, -1, -1):
        best_after[k] = best_after[k + 1] + jobs[k].candidates[-1].accuracy_points
    best: list[float] = [-1.0, 0.0]  # value, -sum of completion times
    best_choice: list[int] = []
    choice = [0] * n
    nodes = 0

    def visit(k: int, t: float, value: float, completion: float) -> bool:
        nonlocal nodes, best_choice
        nodes += 1
        if nodes > max_nodes:
            return False
        if k == n:
            key = [round(value, 9), -completion]
            if key > best:
                best[:] = key
                best_choice = list(choice)
            return True
        if round(value + best_after[k], 9) < best[0]:
            return True
        for c in range(len(jobs[k].candidates) - 1, -1, -1):
            s = jobs[k].candidates[c]
            end = t + s.latency_s
            if end > jobs[k].deadline_s + DEADLINE_EPS_S:
                continue
            choice[k] = c
            if not visit(k + 1, end, value + s.accuracy_points, completion + end):
                return False
        return True

    if not visit(0, start_s, 0.0, 0.0) or not best_choice and n:
        return None
    return best_choice


def replan_greedy(start_s: float, jobs: list[ReplanJob]) -> list[int]:
    """Lagrangian threshold over hull steps, then a backward fill (see module docstring).
    Precondition: all-fastest is feasible (run `drop_pass` first)."""
    n = len(jobs)
    width = max((len(j.options.ratios) for j in jobs), default=0)
    hull_steps = [0] * n
    if width:
        ratios = np.full((n, width), -np.inf)
        deltas = np.zeros((n, width))
        for i, j in enumerate(jobs):
            m = len(j.options.ratios)
            ratios[i, :m] = j.options.ratios
            deltas[i, :m] = j.options.delta_latency_s
        base = np.array([j.candidates[0].latency_s for j in jobs])
        budget = np.array([j.deadline_s for j in jobs]) - start_s + DEADLINE_EPS_S
        hull_steps = _threshold_steps(ratios, deltas, base, budget)
    choices = [j.options.hull[h] for j, h in zip(jobs, hull_steps, strict=True)]
    return _backward_fill(start_s, jobs, choices)


def _threshold_steps(ratios: npt.NDArray[np.float64], deltas: npt.NDArray[np.float64],
                     base: npt.NDArray[np.float64], budget: npt.NDArray[np.float64]) -> list[int]:
    """Hull steps per job at the lowest feasible price (bisection over the step ratios)."""
    prices = np.unique(ratios[np.isfinite(ratios)])[::-1]

    def steps_at(price: float) -> npt.NDArray[np.bool_]:
        taken: npt.NDArray[np.bool_] = ratios >= price
        return taken

    def feasible(price: float) -> bool:
        lat = base + (deltas * steps_at(price)).sum(axis=1)
        return bool((np.cumsum(lat) <= budget).all())

    lo, hi = 0, len(prices)  # prices[:lo] known feasible; answer = largest feasible count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if feasible(float(prices[mid - 1])):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return [0] * len(base)
    counts = steps_at(float(prices[lo - 1])).sum(axis=1)
    return [int(c) for c in counts]


def _backward_fill(start_s: float, jobs: list[ReplanJob], choices: list[int]) -> list[int]:
    """Raise each job, last first, to its most accurate candidate that fits the headroom
    min over k >= job of (deadline_k - finish_k); O(n log c), feasibility preserved."""
    n = len(jobs)
    finish, t = [0.0] * n, start_s
    for k in range(n):
        t += jobs[k].candidates[choices[k]].latency_s
        finish[k] = t
    headroom_after = float("inf")
    out = list(choices)
    for k in range(n - 1, -1, -1):
        job = jobs[k]
        headroom = min(job.deadline_s + DEADLINE_EPS_S - finish[k], headroom_after)
        current = job.candidates[out[k]].latency_s
        lats = job.options.latencies_s
        best = bisect.bisect_right(lats, current + max(headroom, 0.0)) - 1
        if best > out[k]:
            headroom -= lats[best] - current
            out[k] = best
        headroom_after = headroom
    return out


def replan(start_s: float, jobs: list[ReplanJob], exact_max_plans: int = 512,
           drops: str = "fewest") -> ReplanOutcome:
    """Drop the jobs no assignment can save, then choose strategies for the rest: exactly
    when the queue has at most `exact_max_plans` candidate combinations, else greedily."""
    kept, dropped = drop_fewest(start_s, jobs) if drops == "fewest" else drop_pass(start_s, jobs)
    live = [jobs[p] for p in kept]
    top = [len(j.candidates) - 1 for j in live]
    if is_feasible(start_s, live, top):
        return ReplanOutcome(tuple(kept), tuple(top), tuple(dropped), "all-max")
    plans = 1
    for j in live:
        plans *= len(j.candidates)
        if plans > exact_max_plans:
            break
    if plans <= exact_max_plans:
        exact = replan_exact(start_s, live, max_nodes=4 * exact_max_plans)
        if exact is not None:
            return ReplanOutcome(tuple(kept), tuple(exact), tuple(dropped), "exact")
    return ReplanOutcome(tuple(kept), tuple(replan_greedy(start_s, live)), tuple(dropped),
                         "greedy")


def decide_optimized(tables: ModalityTables, snapshot: ModalityQueueSnapshot, now_s: float,
                     drops: str = "fewest", exact_max_plans: int = 512) -> QueuePlan:
    """`OptimizedPolicy.decide` as it was."""
    queue = sorted(snapshot.jobs,
                   key=lambda q: (q.job.deadline_s, q.job.arrival_s, q.job.job_id))
    jobs = [ReplanJob(q.job.job_id, q.job.deadline_s,
                      tables.options(q.job.num_requests, q.accuracy_slo)) for q in queue]
    outcome = replan(max(now_s, snapshot.free_at_s), jobs, exact_max_plans, drops)
    assignments = tuple(JobAssignment(jobs[p].job_id, jobs[p].candidates[c])
                        for p, c in zip(outcome.kept, outcome.choices, strict=True))
    dropped = tuple(JobDrop(jobs[p].job_id, DropReason.DEADLINE_INFEASIBLE if jobs[p].candidates
                            else DropReason.ACCURACY_INFEASIBLE) for p in outcome.dropped)
    return QueuePlan(assignments, dropped, outcome.method)
