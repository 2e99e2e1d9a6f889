"""Token-aware routing arithmetic (policies/generation/token_routing.py, token_ledger.py) and the
pure parts of its Serve glue (deployments/generation/routers.py, the LLM replica's count): costs
per architecture, least-pending choice with ties in rotating order, a call's hold (an LLM call's
tokens until its first chunk), the ledger's reconciliation with replica reports."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.generation.token_ledger import LedgerSettings, TokenLedger
from policies.generation.token_routing import (
    Architecture,
    PendingTokens,
    PromptCost,
    ReplicaLoad,
    ReplicaReport,
    RequestTokens,
    TieOrder,
    TokenHold,
    choose_replica,
    image_route_tokens,
    rank_replicas,
)

counts = st.integers(min_value=0, max_value=5000)
requests = st.builds(RequestTokens, counts, st.integers(0, 16), st.integers(0, 1024), counts)
loads = st.dictionaries(st.text("abcdef", min_size=1, max_size=3),
                        st.builds(ReplicaLoad, counts, st.integers(0, 50)), min_size=1)


@given(requests)
def test_decoder_only_counts_image_tokens_cross_attention_does_not(req: RequestTokens) -> None:
    dec = PromptCost(Architecture.DECODER_ONLY).route_tokens(req)
    cross = PromptCost(Architecture.CROSS_ATTENTION).route_tokens(req)
    assert dec - cross == req.num_images * req.tokens_per_image == image_route_tokens(req)
    assert cross == req.text_tokens  # decode tokens do not count by default
    assert PromptCost("decoder_only").count_image_tokens
    assert not PromptCost("cross_attention").count_image_tokens


def test_decode_weight_counts_expected_decode_tokens_only_when_asked() -> None:
    req = RequestTokens(text_tokens=10, num_images=2, tokens_per_image=9, expected_decode_tokens=40)
    assert PromptCost().route_tokens(req) == 28
    assert PromptCost(decode_weight=0.5).route_tokens(req) == 48
    assert PromptCost(Architecture.CROSS_ATTENTION, decode_weight=0.25).route_tokens(req) == 20
    assert image_route_tokens(RequestTokens(text_tokens=99, num_images=1, tokens_per_image=9)) == 9


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="valid: \\['decoder_only', 'cross_attention'\\]"):
        PromptCost("encoder_decoder")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        RequestTokens(text_tokens=-1)
    with pytest.raises(ValueError, match="decode_weight"):
        PromptCost(decode_weight=-1.0)
    with pytest.raises(ValueError, match="no replica"):
        choose_replica({}, TieOrder(0))


@given(loads, st.integers(0, 2**32))
def test_choice_is_least_tokens_then_least_requests(ls: dict[str, ReplicaLoad], seed: int) -> None:
    ranked = rank_replicas(ls, TieOrder(seed))
    chosen = choose_replica(ls, TieOrder(seed))
    assert chosen == ranked[0] and ls[chosen] == min(ls.values())
    assert sorted(ranked) == sorted(ls)
    assert [ls[r] for r in ranked] == sorted(ls.values())
    assert ranked == rank_replicas(dict(reversed(list(ls.items()))), TieOrder(seed))


def test_fewer_tokens_beat_fewer_requests_and_ties_rotate() -> None:
    ls = {"a": ReplicaLoad(100, 1), "b": ReplicaLoad(30, 3), "c": ReplicaLoad(30, 2)}
    assert choose_replica(ls, TieOrder(0)) == "c"
    tied = {r: ReplicaLoad(5, 1) for r in "abcd"}
    ties = TieOrder(7)
    picks = [choose_replica(tied, ties) for _ in range(12)]
    assert picks[4:8] == picks[:4] == picks[8:] and set(picks[:4]) == set("abcd")  # round robin
    again = TieOrder(7)
    assert [choose_replica(tied, again) for _ in range(12)] == picks  # seeded: reproducible
    firsts = {choose_replica(tied, TieOrder(seed)) for seed in range(40)}
    assert len(firsts) > 1  # routers seeded differently do not all start on one replica


def test_tied_replicas_go_to_the_one_chosen_least_recently() -> None:
    ties = TieOrder(1)
    for r in ("a", "b", "c"):
        ties.chose(r)
    # a and c tied, b loaded: a (chosen longest ago) goes first, then c, then a again
    loads = {"a": ReplicaLoad(0, 0), "b": ReplicaLoad(9, 1), "c": ReplicaLoad(0, 0)}
    assert [choose_replica(loads, ties) for _ in range(3)] == ["a", "c", "a"]
    ties.keep_only(["c"])
    assert ties.key("a")[0] == -1  # forgotten: counts as never chosen


def _ledger() -> TokenLedger:
    return TokenLedger(LedgerSettings(tentative_ttl_s=5.0, report_max_age_s=10.0))


def test_tentative_choices_count_until_confirmed_or_expired() -> None:
    ledger = _ledger()
    ledger.reserve(1, "a", 50, now_s=0.0)
    assert ledger.load("a", 1.0) == ReplicaLoad(50, 1)
    ledger.reserve(1, "b", 50, now_s=1.0)  # the same request chose again: moves
    assert ledger.load("a", 1.0) == ReplicaLoad() and ledger.load("b", 1.0) == ReplicaLoad(50, 1)
    ledger.confirm("k", "c", 50, now_s=2.0, tentative_key=1)
    assert ledger.loads("abc", 2.0) == {"a": ReplicaLoad(), "b": ReplicaLoad(),
                                        "c": ReplicaLoad(50, 1)}
    ledger.reserve(2, "a", 7, now_s=2.0)
    assert ledger.load("a", 7.5) == ReplicaLoad()  # never confirmed: expired
    assert ledger.load("c", 100.0) == ReplicaLoad(50, 1)  # confirmed ones never expire


def test_a_burst_of_choices_spreads_before_any_acceptance() -> None:
    ledger, ties = _ledger(), TieOrder(3)
    placed = []
    for i in range(6):
        best = choose_replica(ledger.loads("abc", 0.0), ties)
        ledger.reserve(i, best, 64, 0.0)
        placed.append(best)
    assert Counter(placed) == {"a": 2, "b": 2, "c": 2}


def test_a_heavy_request_keeps_its_replica_free_of_successors() -> None:
    ledger, ties = _ledger(), TieOrder(0)
    heavy = choose_replica(ledger.loads("abc", 0.0), ties)
    ledger.confirm("heavy", heavy, 10_000, 0.0)
    placed = []
    for i in range(8):
        r = choose_replica(ledger.loads("abc", 0.0), ties)
        ledger.confirm(i, r, 10, 0.0)
        placed.append(r)
    assert heavy not in placed
    assert sorted(Counter(placed).values()) == [4, 4]  # least requests would pick `heavy` too


def test_completed_requests_free_exactly_their_tokens() -> None:
    ledger = _ledger()
    ledger.confirm("x", "a", 300, 0.0)
    ledger.confirm("y", "a", 20, 0.0)
    ledger.report("a", ReplicaReport(900, 5, seq=1), now_s=1.0)  # others: 580 tokens, 3 reqs
    assert ledger.load("a", 1.0) == ReplicaLoad(900, 5)
    assert ledger.release("x")
    assert ledger.load("a", 2.0) == ReplicaLoad(600, 4)  # at once, not at the next report
    assert not ledger.release("x")
    assert ledger.release("y") and ledger.load("a", 2.0) == ReplicaLoad(580, 3)


@settings(max_examples=200)
@given(st.lists(counts, max_size=6), counts, counts, st.integers(0, 20))
def test_reconciliation_is_monotone_and_never_below_what_was_sent(
        mine: list[int], reported: int, more: int, reqs: int) -> None:
    def estimate(report_tokens: int) -> ReplicaLoad:
        ledger = _ledger()
        for i, t in enumerate(mine):
            ledger.confirm(i, "a", t, 0.0)
        ledger.report("a", ReplicaReport(report_tokens, reqs, seq=1), 1.0)
        return ledger.load("a", 1.0)

    low, high = estimate(reported), estimate(reported + more)
    assert low.pending_tokens <= high.pending_tokens
    assert low.pending_tokens == max(sum(mine), reported)  # max(local, R) when the report lands
    assert low.inflight_requests == max(len(mine), reqs)
    ledger = _ledger()
    for i, t in enumerate(mine):
        ledger.confirm(i, "a", t, 0.0)
    ledger.report("a", ReplicaReport(reported, reqs, seq=1), 1.0)
    before = ledger.load("a", 1.0).pending_tokens
    for i, t in enumerate(mine):  # completions only ever lower it, each by its own cost
        ledger.release(i)
        after = ledger.load("a", 1.0).pending_tokens
        assert after == before - t
        before = after


def test_reports_seen_twice_or_too_old_or_from_gone_replicas_are_dropped() -> None:
    ledger = _ledger()
    assert ledger.report("a", ReplicaReport(500, 2, seq=7), now_s=0.0)
    ledger.confirm("x", "a", 100, now_s=1.0)
    assert not ledger.report("a", ReplicaReport(500, 2, seq=7), now_s=1.0)  # same report
    assert ledger.load("a", 1.0) == ReplicaLoad(600, 3)
    assert ledger.load("a", 10.5) == ReplicaLoad(100, 1)  # report older than 10 s
    ledger.report("b", ReplicaReport(40, 1, seq=1), now_s=11.0)
    ledger.keep_only(["b"])
    assert ledger.load("a", 11.0) == ReplicaLoad() and len(ledger) == 0
    assert ledger.load("b", 11.0) == ReplicaLoad(40, 1)


def test_replica_reports_round_trip_through_routing_stats() -> None:
    pending = PendingTokens()
    pending.add(64)
    pending.add(10)
    pending.remove(64)
    first, second = pending.report(), pending.report()
    assert (first.pending_tokens, first.inflight_requests) == (10, 1)
    assert second.seq == first.seq + 1
    assert ReplicaReport.from_stats(first.to_stats()) == first
    assert ReplicaReport.from_stats({}) is None
    assert ReplicaReport.from_stats({**first.to_stats(), "pending_tokens": True}) is None
    pending.remove(500)
    pending.remove(1)
    assert (pending.tokens, pending.requests) == (0, 0)


def test_a_hold_counts_its_tokens_until_settled_and_the_call_until_it_ends() -> None:
    pending = PendingTokens()
    other = TokenHold(pending, 40)
    hold = TokenHold(pending, 100)
    assert (pending.tokens, pending.requests) == (140, 2)
    hold.settle()  # e.g. the first token: the prefill work is done, the call still in flight
    hold.settle()
    assert (pending.tokens, pending.requests) == (40, 2)
    hold.end()
    hold.end()
    assert (pending.tokens, pending.requests) == (40, 1)  # the other call's tokens untouched
    other.end()  # never settled: its tokens go with it
    assert (pending.tokens, pending.requests) == (0, 0)
    late = TokenHold(pending, 5)
    late.end()
    late.settle()  # after the end: nothing more
    assert (pending.tokens, pending.requests) == (0, 0)


def test_glue_reads_route_tokens_and_names_routers() -> None:
    from dataclasses import dataclass

    from deployments.generation.routers import (
        ImageTokenRouter,
        ReportsPendingTokens,
        route_tokens_of,
        token_router_config,
    )

    @dataclass(frozen=True)
    class Call:
        route_tokens: int

    assert route_tokens_of([Call(12)], {}) == 12
    assert route_tokens_of([{"route_tokens": 5}], {}) == 5
    assert route_tokens_of(["x"], {"route_tokens": 7}) == 7
    assert route_tokens_of([], {}) is None and route_tokens_of([Call(-1)], {}) is None
    replica = ReportsPendingTokens()
    with replica.holding_tokens(Call(30)) as hold:
        assert hold.tokens == 30 and replica.pending_tokens.tokens == 30
        hold.settle()
        assert (replica.pending_tokens.tokens, replica.pending_tokens.requests) == (0, 1)
    assert (replica.pending_tokens.tokens, replica.pending_tokens.requests) == (0, 0)
    with pytest.raises(RuntimeError), replica.holding_tokens(7):
        raise RuntimeError("the call failed")
    assert (replica.pending_tokens.tokens, replica.pending_tokens.requests) == (0, 0)
    cfg = token_router_config("image_tokens", stats_period_s=0.5, seed=1)
    assert cfg.request_router_class.endswith(ImageTokenRouter.__name__)
    assert cfg.request_router_kwargs == {"report_max_age_s": 2.5, "seed": 1}
    with pytest.raises(ValueError, match="valid: \\['pow2', 'image_tokens', 'prompt_tokens'\\]"):
        token_router_config("least_loaded")


class _Engine:
    """The engine boundary (vLLM / transformers, not ours): three deltas, noting the replica's
    pending-token count when the prefill starts and at each later step."""

    def __init__(self, replica: Any) -> None:
        self.replica = replica
        self.seen: list[tuple[int, int]] = []

    def shutdown(self) -> None:
        pass

    def _note(self) -> None:
        p = self.replica.pending_tokens
        self.seen.append((p.tokens, p.requests))

    async def generate(self, request: Any) -> AsyncIterator[Any]:
        from deployments.engines import TokenDelta

        self._note()  # the prefill runs: the prompt's tokens count
        yield TokenDelta("a", (1,))
        self._note()
        yield TokenDelta("b", (2,))
        self._note()
        yield TokenDelta("", (), finished=True, finish_reason="stop", prompt_tokens=30,
                         completion_tokens=2)


def test_the_llm_replica_counts_a_prompt_until_its_first_chunk() -> None:
    import time

    from deployments.autoscaling.decisions import IMAGE_TOKENS, TEXT_TOKENS
    from deployments.autoscaling.reporting import ArrivalRates
    from deployments.generation.llm import LLMBackend, LLMSettings
    from deployments.generation.stage_messages import GenerateCall

    cls = LLMBackend.func_or_class
    replica = cls.__new__(cls)  # the replica without Serve or a model: only its stream
    replica.settings, replica.epoch_s, replica.in_flight = LLMSettings(), 0.0, 0
    replica.tokens_per_image = 10
    replica.arrivals = ArrivalRates((TEXT_TOKENS, IMAGE_TOKENS), 5.0)
    replica.engine = engine = _Engine(replica)
    now = time.time()
    call = GenerateCall("r1", "hi", 8, now, now + 60.0, 30, 0, route_tokens=30)

    async def stream() -> list[Any]:
        return [chunk async for chunk in replica.generate(call, [])]

    chunks = asyncio.run(stream())
    assert [c.text for c in chunks] == ["a", "b", ""] and chunks[-1].finished
    # 30 tokens while the prefill runs; after the first chunk the call is only in flight
    assert engine.seen == [(30, 1), (0, 1), (0, 1)]
    p = replica.pending_tokens
    assert (p.tokens, p.requests) == (0, 0)
