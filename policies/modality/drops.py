"""Drop rules of the MOSEL re-plan over a queue in EDF order (see
`policies/modality/replan.py` for the rules and their guarantees).

Inputs per queue position, as plain lists: `fastest_s` (latency of the fastest SLO-meeting
strategy), `limit_s` (deadline + DEADLINE_EPS_S), `sizes` (requests) and `options` (number of
candidates; 0 when the accuracy SLO is unreachable: such a job is always dropped and takes no
time).
"""

from __future__ import annotations

import numpy as np


def walk(start_s: float, fastest_s: list[float], limit_s: list[float],
         options: list[int]) -> tuple[list[int], list[int], int]:
    """Violator rule: walking the queue at all-fastest, drop each job that still misses.
    Also returns how many leading jobs take part in the fewest-requests rule: up to the last
    one that misses when every job with a candidate is kept."""
    t, t_all, stages = start_s, start_s, 0
    kept: list[int] = []
    dropped: list[int] = []
    for pos, (latency_s, limit, count) in enumerate(zip(fastest_s, limit_s, options,
                                                          strict=True)):
        if not count:
            dropped.append(pos)
            continue
        t_all += latency_s
        if t_all > limit:
            stages = pos + 1
        end = t + latency_s
        if end > limit:
            dropped.append(pos)
        else:
            kept.append(pos)
            t = end
    return kept, dropped, stages


def drop_fewest_lists(start_s: float, fastest_s: list[float], limit_s: list[float],
                      sizes: list[int], options: list[int],
                      max_jobs: int = 64) -> tuple[list[int], list[int]]:
    """Fewest dropped requests (Lawler-Moore DP, 1||sum w_j U_j with w = size) over the
    jobs up to the last one late with nothing dropped; above `max_jobs` of them, the
    violator rule. Among equal drops, the set whose kept jobs end earliest."""
    kept, dropped, stages = walk(start_s, fastest_s, limit_s, options)
    width = sum(sizes[p] for p in dropped) + 1  # the violator rule's drops bound the optimum
    if width == 1 or stages > max_jobs:
        return kept, dropped
    return _fewest_dp(start_s, fastest_s, limit_s, sizes, options, stages, width)


def _fewest_dp(start_s: float, fastest_s: list[float], limit_s: list[float], sizes: list[int],
               options: list[int], stages: int, width: int) -> tuple[list[int], list[int]]:
    """finish[d] = earliest end of the first k jobs dropping exactly d requests. The finish
    rows live behind `shift` cells of +inf, so 'drop job k' reads a shifted view (no copy);
    two buffers alternate so the new row never overlaps the one it is computed from."""
    shift = max(sizes[:stages])
    bufs = (np.full(shift + width, np.inf), np.full(shift + width, np.inf))
    bufs[0][shift] = start_s
    keep, late = np.empty(width), np.empty(width, dtype=np.bool_)
    dropped_at = np.ones((stages, width), dtype=np.bool_)
    cur = 0
    for k in range(stages):
        if not options[k]:
            continue  # accuracy-infeasible: always dropped, costs no time
        n = sizes[k]
        row = bufs[cur]
        skip = row[shift - n:shift - n + width]
        np.add(row[shift:], fastest_s[k], out=keep)
        np.greater(keep, limit_s[k], out=late)
        np.putmask(keep, late, np.inf)
        np.less(skip, keep, out=dropped_at[k])
        cur = 1 - cur
        np.minimum(keep, skip, out=bufs[cur][shift:])
    d = int(np.argmax(np.isfinite(bufs[cur][shift:])))
    kept = [p for p in range(stages, len(sizes)) if options[p]]
    dropped = [p for p in range(stages, len(sizes)) if not options[p]]
    for k in range(stages - 1, -1, -1):
        if dropped_at[k, d]:
            dropped.append(k)
            d -= sizes[k]
        else:
            kept.append(k)
    return sorted(kept), sorted(dropped)
