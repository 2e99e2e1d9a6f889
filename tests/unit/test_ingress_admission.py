"""The front door's pieces without Ray: the X-Request-Start clock, the admission estimate and job
room, and an ingress process that never loads torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from deployments.ingress.classify.admission import (
    Admission,
    DrainEstimate,
    FamilyCapacity,
    per_item_s,
)
from deployments.ingress.classify.catalog import Catalog, family_info
from deployments.ingress.clock import StartSource, arrival_from, parse_request_start
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant

ROOT = Path(__file__).resolve().parents[2]
NOW_S = 1_795_000_000.25


@pytest.mark.parametrize("value", [
    "t=1795000000.125", "1795000000.125", "t=1795000000125", "1795000000125",
    "1795000000125000", "t=1795000000125000", " t= 1795000000.125 "])
def test_request_start_in_seconds_ms_or_us_by_magnitude(value: str) -> None:
    assert parse_request_start(value) == pytest.approx(1_795_000_000.125, abs=1e-6)


@pytest.mark.parametrize("value", ["", "t=", "abc", "t=nan", "-5", "0", "t=inf"])
def test_request_start_not_a_time(value: str) -> None:
    assert parse_request_start(value) is None


def test_arrival_believes_recent_headers_only() -> None:
    def arrive(header: str | None):  # type: ignore[no-untyped-def]
        return arrival_from(header, NOW_S, max_skew_s=0.5, max_age_s=30.0)

    a = arrive(f"t={NOW_S - 0.2}")
    assert a.source is StartSource.HEADER and a.time_s == pytest.approx(NOW_S - 0.2)
    assert a.pre_ingress_s == pytest.approx(0.2)
    skewed = arrive(f"t={NOW_S + 0.3}")  # within the skew: believed, the clock starts at entry
    assert skewed.source is StartSource.HEADER and skewed.time_s == NOW_S
    assert skewed.pre_ingress_s == 0.0
    for header, source in [(None, StartSource.ENTRY), ("soon", StartSource.IGNORED_MALFORMED),
                           (f"t={NOW_S + 2}", StartSource.IGNORED_FUTURE),
                           (f"{(NOW_S - 31) * 1000:.0f}", StartSource.IGNORED_STALE)]:
        a = arrive(header)
        assert a.source is source and a.time_s == NOW_S and a.pre_ingress_s == 0.0
        assert a.source.ignored == (header is not None)


def profile(points_ms: dict[str, dict[int, float]], accuracy: dict[str, float]) -> Profile:
    return Profile("f.t", "cpu", tuple(
        VariantProfile(Variant(name, name), accuracy[name],
                       tuple(LatencyPoint(b, ms, ms, ms, ms) for b, ms in sorted(pts.items())))
        for name, pts in points_ms.items()))


def two_variant_catalog() -> Catalog:
    prof = profile({"small": {1: 2.0, 8: 8.0}, "large": {1: 10.0, 8: 40.0}},
                   {"small": 0.7, "large": 0.9})
    return Catalog((family_info("f", ("image",), {"t": prof}, "ramsis", "p95", 8),))


def test_per_item_time_is_the_cheapest_variant_at_its_largest_batch() -> None:
    task = two_variant_catalog().families[0].tasks[0]
    assert per_item_s(task) == pytest.approx(0.001)  # small: 8 ms / 8 items


def test_expected_wait_scales_with_in_flight_items_replicas_and_ingresses() -> None:
    cat = two_variant_catalog()
    one = Admission(cat, {"f": FamilyCapacity(replicas=1, max_queued_items=256)})
    one.begin("f", 100)
    assert one.expected_wait_s("f", "t") == pytest.approx(0.1)
    two = Admission(cat, {"f": FamilyCapacity(replicas=2, max_queued_items=256)},
                    ingress_replicas=3)
    two.begin("f", 100)
    assert two.expected_wait_s("f", "t") == pytest.approx(0.15)
    two.end("f", 150)
    assert two.inflight("f") == 0
    with pytest.raises(ValueError, match="no capacity given for families"):
        Admission(cat, {})


def test_check_refuses_when_wait_plus_fastest_passes_the_deadline() -> None:
    cat = two_variant_catalog()
    family, task = cat.families[0], cat.families[0].tasks[0]
    adm = Admission(cat, {"f": FamilyCapacity(1, 256)})
    adm.begin("f", 97)  # 97 ms of work + the fastest variant's 2 ms
    assert adm.check(family, task, NOW_S, NOW_S + 0.1) is None
    adm.begin("f", 2)
    refusal = adm.check(family, task, NOW_S, NOW_S + 0.1)
    assert refusal is not None and refusal.retry_after_s == 1
    assert "f is overloaded" in refusal.message and "99 items in flight" in refusal.message
    adm.begin("f", 2401)
    refusal = adm.check(family, task, NOW_S, NOW_S + 0.1)
    assert refusal is not None and refusal.retry_after_s == 3  # ceil(2.5 s)
    lost = Admission(cat, {"f": FamilyCapacity(1, 256)})
    assert lost.check(family, task, NOW_S, NOW_S - 0.01) is not None  # already past


def test_measured_drain_prices_the_items_ahead_when_the_front_is_the_bottleneck() -> None:
    drain = DrainEstimate(alpha=1.0)
    assert drain.wait_s(100) == 0.0  # nothing measured yet: the profile alone decides
    drain.record(ahead_items=1, latency_s=0.02)  # unloaded: 20 ms of hops, decode, one batch
    drain.record(ahead_items=11, latency_s=0.13)  # 10 ms per item ahead
    assert drain.base_s == pytest.approx(0.02) and drain.per_item_s == pytest.approx(0.01)
    assert drain.wait_s(30) == pytest.approx(0.32)
    assert drain.wait_s(1) == pytest.approx(0.03)
    assert drain.wait_s(0) == 0.0  # nothing in flight: never stuck refusing
    cat = two_variant_catalog()
    adm = Admission(cat, {"f": FamilyCapacity(1, 256)})
    adm.begin("f", 11)
    adm.end("f", 1, ahead_items=1, latency_s=0.02)
    adm.end("f", 10, ahead_items=11, latency_s=0.13)
    assert adm.inflight("f") == 0
    assert adm.expected_wait_s("f", "t") == 0.0
    adm.begin("f", 30)  # profiled: 30 ms; measured: 20 ms + 30 x 1 ms (alpha 0.1 of 10 ms)
    assert adm.expected_wait_s("f", "t") == pytest.approx(0.05)
    family, task = cat.families[0], cat.families[0].tasks[0]
    assert adm.check(family, task, NOW_S, NOW_S + 0.04) is not None
    assert adm.check(family, task, NOW_S, NOW_S + 0.06) is None


def test_a_base_measured_high_once_does_not_refuse_forever() -> None:
    """After a node loss an ingress measured only calls that waited for a replica (~220 ms);
    refused requests bring no new answers, so an idle family must still let one through."""
    cat = two_variant_catalog()
    family, task = cat.families[0], cat.families[0].tasks[0]
    adm = Admission(cat, {"f": FamilyCapacity(1, 256)})
    adm.begin("f", 1)
    adm.end("f", 1, ahead_items=1, latency_s=0.22)
    assert adm.check(family, task, NOW_S, NOW_S + 0.18) is None  # idle: admitted
    adm.end("f", 0, ahead_items=1, latency_s=0.015)  # its answer corrects the base
    adm.begin("f", 1)
    assert adm.expected_wait_s("f", "t") == pytest.approx(0.015, abs=0.002)
    adm.end("f", 1, ahead_items=1, latency_s=None)  # a call that failed measures nothing
    adm.begin("f", 1)
    assert adm.expected_wait_s("f", "t") == pytest.approx(0.015, abs=0.002)


def test_job_room_is_bounded_by_the_free_queue_and_the_job_share() -> None:
    adm = Admission(two_variant_catalog(), {"f": FamilyCapacity(2, 64)}, max_job_share=0.25)
    assert adm.job_room("f", 10).admitted == 10
    room = adm.job_room("f", 5000)  # a quarter of 2 x 64
    assert (room.admitted, room.shed) == (32, 4968) and "share of a job" in room.reason
    adm.begin("f", 120)
    room = adm.job_room("f", 5000)
    assert (room.admitted, room.shed) == (8, 4992) and "free queue space" in room.reason
    adm.begin("f", 8)
    assert adm.job_room("f", 3).admitted == 0


def test_ingress_imports_no_torch() -> None:
    """The ingress process only parses, admits and forwards: importing its deployment module
    (and unpickling the class the way a Serve replica receives it) must not load torch."""
    code = (
        "import sys\n"
        "import ray.cloudpickle as cp\n"
        "import deployments.ingress.deployment as d\n"
        "blob = cp.dumps(d.Ingress.func_or_class)\n"
        "assert cp.loads(blob) is not None\n"
        "heavy = sorted(m for m in ('torch', 'torchvision', 'timm', 'PIL') if m in sys.modules)\n"
        "print(heavy)\n"
        "sys.exit(1 if 'torch' in heavy else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


def test_an_slo_below_what_the_server_can_ever_do_is_unachievable() -> None:
    """422 below the fastest variant's batch-1 time (its budget after the response margin),
    and below the fastest answer the path has given lately; above both, resolved."""
    from deployments.ingress.classify.schemas import SLOSpec
    from deployments.ingress.classify.service import resolve
    from deployments.ingress.errors import ApiError

    cat = two_variant_catalog()
    admission = Admission(cat, {"f": FamilyCapacity(replicas=1, max_queued_items=256)})
    assert admission.fastest_answer_ms("f", NOW_S) == 0.0  # none yet: the profile decides
    admission.answered("f", 0.004, NOW_S - 31)  # forgotten: older than ANSWERS_FRESH_S
    admission.answered("f", 0.3, NOW_S - 1)  # one slow (cold) answer alone refuses nothing
    assert admission.fastest_answer_ms("f", NOW_S) == 0.0
    for latency_s in (0.009, 0.0065, 0.02, 0.01, 0.011, 0.012, 0.013):
        admission.answered("f", latency_s, NOW_S - 1)
    assert admission.fastest_answer_ms("f", NOW_S) == pytest.approx(6.5)  # 8 fresh answers
    assert admission.fastest_answer_ms("f", NOW_S + 40) == 0.0  # all forgotten

    def code(slo_ms: float, budget_ms: float | None = None) -> str | None:
        try:
            resolve(cat, "f", "t", SLOSpec(latency_ms=slo_ms), budget_ms,
                    admission.fastest_answer_ms("f", NOW_S))
        except ApiError as exc:
            assert "ask for at least" in exc.message and exc.status == 422
            return exc.type
        return None

    assert code(1.5) == "slo_unachievable"  # below small's 2 ms
    assert code(4.0) == "slo_unachievable"  # above 2 ms, below the 6.5 ms answered at best
    assert code(7.0) is None
    assert code(10.0, budget_ms=5.0) == "slo_unachievable"  # the margin counts


def test_a_family_degrades_when_its_policy_does_and_it_has_variants_to_trade() -> None:
    two = profile({"small": {1: 2.0}, "large": {1: 10.0}}, {"small": 0.7, "large": 0.9})
    one = profile({"large": {1: 10.0}}, {"large": 0.9})
    def degrades(policy: str, prof: Profile) -> bool:
        return family_info("f", ("image",), {"t": prof}, policy, "p95", 8).degrades
    assert degrades("ramsis", two) and degrades("otas", two) and degrades("mosel", two)
    assert not degrades("most_accurate", two) and not degrades("fixed_gamma", two)
    assert not degrades("ramsis", one)  # nothing to trade
    assert Catalog((family_info("f", ("image",), {"t": two}, "ramsis", "p95", 8),)
                   ).to_json()["models"][0]["degrades"] is True
    with pytest.raises(ValueError, match="valid: .*ramsis"):
        degrades("nonesuch", two)
