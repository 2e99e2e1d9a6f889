"""MOSEL online stage (section 5.2): re-assign strategies over an EDF queue.

Problem: jobs in deadline order, each with Pareto candidates from the strategy matrix
(latency ascending, accuracy points ascending, all meeting the job's accuracy SLO). The
queue starts at `start_s` (when the running job ends). Choose one candidate per job to
maximize total accuracy points (sum of accuracy x size) such that every job finishes by its
deadline: start_s + sum of latencies up to and including job k <= deadline_k for every k.
The paper's single budget T is the binding case of these prefix constraints.

Drops, when no assignment of the candidates fits (the paper: "drop the job at risk"):
- `drop_pass` (rule "violator"): walking the queue in EDF order with every kept job on its
  fastest SLO-meeting strategy, drop each job that still misses its deadline.
- `drop_fewest` (rule "fewest", the optimized policy's default): drop the set of jobs with
  the fewest requests whose removal lets every other job meet its deadline. The objective is
  size-weighted, so a newcomer of 3 requests must not push out a queued job of 50: under the
  violator rule it does (the 50-request job becomes the violator).

What is guaranteed:
- Every returned plan meets every kept job's deadline (per profile latency) and accuracy SLO.
- Drops happen only when no assignment fits all jobs, and the kept set is maximal: adding any
  dropped job back (everything on its fastest strategy) makes some kept job miss.
- `replan_exact` (depth-first branch and bound) is optimal; ties are broken toward the
  smaller sum of completion times. It is used when the queue is short.
- `replan_greedy` is a Lagrangian threshold on the jobs' convex-hull upgrade steps (one
  global accuracy-per-second price, the first infeasible one found by vectorized feasibility
  checks over windows of prices), followed by a backward fill pass that spends every
  remaining slack. It is feasible by construction, not always optimal; tests measure its gap
  against the exact solver.

The work happens on arrays (`replan_packed`; drops in `modality_drops`, greedy in
`modality_greedy`): the policy packs all candidate sets once (`PackedSets`), so a queue is a
vector of deadlines and a vector of set ids; the functions taking `ReplanJob` lists pack them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from policies.modality.candidates import (
    DEADLINE_EPS_S,
    SMALL_QUEUE,
    CandidateSet,
    FloatArray,
    IntArray,
    PackedSets,
)
from policies.modality.drops import drop_fewest_lists, walk
from policies.modality.greedy import greedy_choices
from policies.modality.matrix import Strategy

DROP_RULES = ("fewest", "violator")
__all__ = ["DEADLINE_EPS_S", "DROP_RULES", "CandidateSet", "ReplanJob", "ReplanOutcome",
           "drop_fewest", "drop_pass", "is_feasible", "replan", "replan_exact",
           "replan_greedy", "replan_packed"]


@dataclass(frozen=True)
class ReplanJob:
    """A queued job as the optimizer sees it: deadline and its candidate strategies."""

    job_id: int
    deadline_s: float
    options: CandidateSet

    @property
    def candidates(self) -> tuple[Strategy, ...]:
        return self.options.candidates


@dataclass(frozen=True)
class ReplanOutcome:
    """Chosen candidate index per kept job (queue order) and the jobs dropped."""

    kept: tuple[int, ...]
    choices: tuple[int, ...]
    dropped: tuple[int, ...]
    method: str


def _pack(jobs: list[ReplanJob]) -> tuple[FloatArray, IntArray, PackedSets]:
    deadlines = np.array([j.deadline_s for j in jobs], dtype=np.float64)
    return deadlines, np.arange(len(jobs), dtype=np.int64), PackedSets.of(
        [j.options for j in jobs])


def drop_pass(start_s: float, jobs: list[ReplanJob]) -> tuple[list[int], list[int]]:
    """Positions kept / dropped: a job is dropped iff it misses at all-fastest (see module)."""
    deadlines, _, packed = _pack(jobs)
    kept, dropped, _ = walk(start_s, packed.fastest_s.tolist(),
                            (deadlines + DEADLINE_EPS_S).tolist(), packed.num_candidates.tolist())
    return kept, dropped


def drop_fewest(start_s: float, jobs: list[ReplanJob],
                max_jobs: int = 64) -> tuple[list[int], list[int]]:
    """Positions kept / dropped dropping the fewest requests (kept jobs at their fastest
    SLO-meeting strategy, EDF order; see module). Exact: the Lawler-Moore DP for
    1||sum w_j U_j with w = job size, over dropped requests d <= what `drop_pass` drops;
    among equal d, the drop set whose kept jobs end earliest. Only the jobs up to the last
    one late with nothing dropped can matter. Above `max_jobs` such jobs, `drop_pass`."""
    deadlines, _, packed = _pack(jobs)
    return drop_fewest_lists(start_s, packed.fastest_s.tolist(),
                             (deadlines + DEADLINE_EPS_S).tolist(), packed.num_requests.tolist(),
                             packed.num_candidates.tolist(), max_jobs)


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
    deadlines, ids, packed = _pack(jobs)
    return greedy_choices(start_s, deadlines, ids, packed)


def replan(start_s: float, jobs: list[ReplanJob], exact_max_plans: int = 512,
           drops: str = "fewest") -> ReplanOutcome:
    """Drop the jobs no assignment can save, then choose strategies for the rest: exactly
    when the queue has at most `exact_max_plans` candidate combinations, else greedily."""
    deadlines, ids, packed = _pack(jobs)
    return replan_packed(start_s, deadlines, ids, packed, exact_max_plans, drops)


def replan_packed(start_s: float, deadlines_s: FloatArray, ids: IntArray, packed: PackedSets,
                  exact_max_plans: int = 512, drops: str = "fewest") -> ReplanOutcome:
    """`replan` for a queue given as deadlines and rows of `packed` (EDF order)."""
    every, set_ids = packed.sets, ids.tolist()
    limit_s, fastest_s, sizes, counts = _queue_lists(deadlines_s, ids, set_ids, packed)
    if drops == "fewest":
        kept, dropped = drop_fewest_lists(start_s, fastest_s, limit_s, sizes, counts)
    else:
        kept, dropped, _ = walk(start_s, fastest_s, limit_s, counts)
    t = start_s
    for p in kept:  # all-max, until the first miss
        t += every[set_ids[p]].latencies_s[-1]
        if t > limit_s[p]:
            break
    else:
        return ReplanOutcome(tuple(kept), tuple(counts[p] - 1 for p in kept), tuple(dropped),
                             "all-max")
    plans = 1
    for p in kept:
        plans *= counts[p]
        if plans > exact_max_plans:
            break
    if plans <= exact_max_plans:
        jobs = [ReplanJob(p, float(deadlines_s[p]), every[set_ids[p]]) for p in kept]
        exact = replan_exact(start_s, jobs, max_nodes=4 * exact_max_plans)
        if exact is not None:
            return ReplanOutcome(tuple(kept), tuple(exact), tuple(dropped), "exact")
    at = np.array(kept, dtype=np.int64)
    choices = greedy_choices(start_s, deadlines_s[at], ids[at], packed)
    return ReplanOutcome(tuple(kept), tuple(choices), tuple(dropped), "greedy")


def _queue_lists(deadlines_s: FloatArray, ids: IntArray, set_ids: list[int], packed: PackedSets
                 ) -> tuple[list[float], list[float], list[int], list[int]]:
    """Per job: deadline + DEADLINE_EPS_S, fastest latency, requests, candidates. Read from
    the sets on a few jobs (cheaper), else gathered from the packed arrays (same values)."""
    if len(set_ids) > SMALL_QUEUE:
        return ((deadlines_s + DEADLINE_EPS_S).tolist(), packed.fastest_s[ids].tolist(),
                packed.num_requests[ids].tolist(), packed.num_candidates[ids].tolist())
    sets = [packed.sets[i] for i in set_ids]
    return ([d + DEADLINE_EPS_S for d in deadlines_s.tolist()],
            [s.latencies_s[0] if s.candidates else 0.0 for s in sets],
            [s.candidates[0].num_requests if s.candidates else 0 for s in sets],
            [len(s.candidates) for s in sets])
