"""Decoding (preprocess or classifier) stops work whose deadline is lost: nothing decoded or sent once the call cannot make
its deadline, and every item still answered (deadline_exceeded)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from deployments.decode import deadline_lost, decode_items
from deployments.preprocess import Preprocess
from deployments.wire import ClassifyCall, ItemResult, ItemStatus


class CountingModel:
    def __init__(self) -> None:
        self.decoded = 0

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, Any]:
        self.decoded += 1
        return {"image": inputs["image"]}


class _Response:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self):  # type: ignore[no-untyped-def]
        async def get() -> Any:
            return self.value
        return get().__await__()


class FakeClassifier:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.submit = self

    def remote(self, items: list[Any]) -> _Response:
        self.sent.append(items)
        return _Response([ItemResult(i.item_id, ItemStatus.OK, label=0, confidence=1.0)
                          for i in items])


def call(n: int, deadline_in_s: float, min_service_s: float = 0.0) -> ClassifyCall:
    now = time.time()
    return ClassifyCall(family="m", task="t", inputs=tuple({"image": i} for i in range(n)),
                        item_ids=tuple(f"id{i}" for i in range(n)), arrival_s=now,
                        deadline_s=now + deadline_in_s, job_id="j" if n > 1 else None,
                        min_service_s=min_service_s)


def preprocess(model: CountingModel, classifier: FakeClassifier) -> Any:
    """The deployment's class without its constructor (no weights, no handles)."""
    cls = Preprocess.func_or_class
    shell = cls.__new__(cls)
    shell.models, shell.classifiers, shell.grace_s = {"m": model}, {"m": classifier}, 0.5
    return shell


def test_decode_stops_at_the_item_where_the_deadline_is_lost() -> None:
    model = CountingModel()
    checks = iter([False, False, False, True])
    result = decode_items(model, "t", tuple({"image": i} for i in range(10)),
                          lambda: next(checks))
    assert result.deadline_lost and len(result.items) == 3 and model.decoded == 3


def test_deadline_lost_counts_the_fastest_variant() -> None:
    clock_s = 100.0
    c = ClassifyCall("m", "t", ({},), ("a",), arrival_s=99.9, deadline_s=100.05,
                     min_service_s=0.04)
    assert not deadline_lost(c, lambda: clock_s)()
    assert deadline_lost(c, lambda: clock_s + 0.02)()


def test_lost_job_is_neither_decoded_nor_sent_yet_every_item_answered() -> None:
    model, classifier = CountingModel(), FakeClassifier()
    outcome = asyncio.run(preprocess(model, classifier).classify(call(50, -0.01)))
    assert model.decoded == 0 and classifier.sent == []
    assert [r.item_id for r in outcome.results] == [f"id{i}" for i in range(50)]
    assert {r.status for r in outcome.results} == {ItemStatus.DEADLINE_EXCEEDED}
    # the fastest variant no longer fits the slack: lost too
    outcome = asyncio.run(preprocess(model, classifier).classify(call(1, 0.01, 0.05)))
    assert outcome.results[0].status is ItemStatus.DEADLINE_EXCEEDED and model.decoded == 0


def test_call_in_time_is_decoded_and_sent() -> None:
    model, classifier = CountingModel(), FakeClassifier()
    outcome = asyncio.run(preprocess(model, classifier).classify(call(4, 5.0, 0.001)))
    assert model.decoded == 4 and len(classifier.sent) == 1 and len(classifier.sent[0]) == 4
    assert [r.status for r in outcome.results] == [ItemStatus.OK] * 4
