"""The family liveness state machine (policies/liveness.py): probes and the request path's
signals move a family between starting, up, suspect and down; only down refuses."""

from __future__ import annotations

import pytest

from policies.liveness import (
    FamilyHealth,
    Health,
    LivenessSettings,
    ProbeResult,
    after_answer,
    after_call_failed,
    after_probe,
    after_slow_call,
    starting,
)

S = LivenessSettings(probe_period_s=2.0, down_probe_period_s=0.5, probe_timeout_s=1.0,
                     suspect_max_s=3.0, retry_after_s=1)
NO_REPLICA = ProbeResult(0, error="no running replica (DeploymentUnavailableError)")


def up(now_s: float = 10.0, live: int = 1) -> FamilyHealth:
    return after_probe(starting(0.0), ProbeResult(live), now_s, S)


def test_starts_passing_and_probes_at_once() -> None:
    h = starting(5.0)
    assert h.state is Health.STARTING and not h.refuses and not h.healthy
    assert h.next_probe_s == 5.0


def test_a_probe_that_reaches_replicas_is_up() -> None:
    h = up(10.0, live=2)
    assert h.state is Health.UP and h.healthy and not h.refuses
    assert h.live_replicas == 2 and h.since_s == 10.0 and h.next_probe_s == 12.0


def test_no_running_replica_is_down_and_refuses() -> None:
    h = after_probe(up(), NO_REPLICA, 11.0, S)
    assert h.state is Health.DOWN and h.refuses and not h.healthy
    assert h.live_replicas == 0 and "DeploymentUnavailableError" in h.reason
    assert h.next_probe_s == 11.5 and h.since_s == 11.0


def test_no_running_replica_while_starting_waits_for_serve_to_build_one() -> None:
    """At start Serve may still be constructing the family's replicas (tens of seconds): not
    down, requests wait; past `start_grace_s` it is down; dead replicas are down at once."""
    h = after_probe(starting(0.0), NO_REPLICA, 40.0, S)
    assert h.state is Health.STARTING and not h.refuses and h.next_probe_s == 40.5
    assert "DeploymentUnavailableError" in h.reason
    assert after_probe(h, ProbeResult(1), 41.0, S).state is Health.UP
    late = after_probe(starting(0.0), NO_REPLICA, S.start_grace_s + 1.0, S)
    assert late.state is Health.DOWN and late.refuses
    dead = after_probe(starting(0.0), ProbeResult(0, failed=1, error="ActorDiedError"), 1.0, S)
    assert dead.refuses


def test_every_replica_failing_the_probe_is_down() -> None:
    h = after_probe(up(), ProbeResult(0, failed=2, error="ActorDiedError: dead"), 11.0, S)
    assert h.refuses and "ActorDiedError" in h.reason


def test_a_failed_call_makes_it_suspect_and_probes_now_without_refusing() -> None:
    h = after_call_failed(up(), "ActorDiedError: the actor died", 11.0)
    assert h.state is Health.SUSPECT and not h.refuses and h.healthy
    assert h.next_probe_s == 11.0 and "ActorDiedError" in h.reason


def test_suspect_with_another_replica_answering_is_up_again() -> None:
    h = after_call_failed(up(live=2), "ActorDiedError", 11.0)
    h = after_probe(h, ProbeResult(1, failed=1, error="ActorDiedError"), 11.01, S)
    assert h.state is Health.UP and h.live_replicas == 1 and "1 replica(s) failed" in h.reason


def test_suspect_then_no_replica_is_down() -> None:
    h = after_call_failed(up(), "ActorDiedError", 11.0)
    h = after_probe(h, NO_REPLICA, 11.01, S)
    assert h.refuses and h.since_s == 11.01


def test_a_busy_family_is_not_down() -> None:
    """Probes timing out while up: replicas exist but are saturated (429's business)."""
    h = up()
    for t in (12.0, 14.0, 16.0, 18.0):
        h = after_probe(h, ProbeResult(0, timed_out=True), t, S)
        assert h.state is Health.UP and h.next_probe_s == t + 2.0 and h.since_s == 10.0


def test_a_silent_suspect_goes_down_after_suspect_max() -> None:
    h = after_call_failed(up(), "ActorUnavailableError", 11.0)
    h = after_probe(h, ProbeResult(0, timed_out=True), 12.0, S)
    assert h.state is Health.SUSPECT and h.next_probe_s == 12.5
    h = after_probe(h, ProbeResult(0, timed_out=True), 14.0, S)
    assert h.refuses and "no replica answered for 3.0 s" in h.reason


def test_down_stays_down_with_its_start_time_until_a_replica_answers() -> None:
    h = after_probe(up(), NO_REPLICA, 11.0, S)
    for t in (11.5, 12.0, 12.5):
        h = after_probe(h, NO_REPLICA, t, S)
        h = after_call_failed(h, "ActorDiedError", t)
        assert h.refuses and h.since_s == 11.0
    h = after_probe(h, ProbeResult(1), 23.0, S)
    assert h.state is Health.UP and h.since_s == 23.0 and not h.refuses


def test_an_answer_lifts_down_and_asks_for_a_probe_now() -> None:
    h = after_probe(up(), NO_REPLICA, 11.0, S)
    h = after_answer(h, 11.2)
    assert h.state is Health.UP and h.next_probe_s == 11.2 and h.live_replicas == 1
    assert after_answer(h, 11.3) is h  # up stays the same object: cheap on the hot path


def test_a_slow_call_brings_the_probe_forward_at_most_once_per_down_period() -> None:
    """A replica killed with no call on it fails no call (Serve's router waits for another):
    a call unanswered for slow_call_s asks for a probe, no sooner than down_probe_period_s
    after the last one."""
    h = up(10.0)
    assert h.probed_s == 10.0 and h.next_probe_s == 12.0
    h = after_slow_call(h, 10.1, S)
    assert h.state is Health.UP and h.next_probe_s == 10.5
    assert after_slow_call(h, 10.2, S) is h
    h = after_probe(h, NO_REPLICA, 10.5, S)
    assert h.refuses and after_slow_call(h, 10.6, S) is h


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="retry_after_s"):
        LivenessSettings(retry_after_s=0)
    with pytest.raises(ValueError):
        LivenessSettings(probe_timeout_s=0)
