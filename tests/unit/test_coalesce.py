"""The ingress's coalescer keeps merged calls under the gRPC message budget
(deployments/ingress/classify/coalesce.py); the app refuses a body limit a call could not carry."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from app.config import AppConfig
from deployments.config import GRPC_MESSAGE_ENV
from deployments.ingress.classify.coalesce import Coalescer, call_bytes
from deployments.wire import ClassifyCall, ClassifyOutcome


class RecordingHandle:
    """Stands in for Serve's DeploymentHandle (a boundary we do not own): records each
    `classify_many` call and answers every call with no results."""

    def __init__(self) -> None:
        self.sent: list[list[ClassifyCall]] = []
        self.classify_many = self

    def remote(self, calls: list[ClassifyCall]) -> Any:
        self.sent.append(list(calls))

        async def answer() -> list[ClassifyOutcome]:
            return [ClassifyOutcome(results=()) for _ in calls]
        return asyncio.ensure_future(answer())


def call(image_bytes: int, n: int = 1) -> ClassifyCall:
    now = time.time()
    return ClassifyCall(family="f", task="t", inputs=({"image": "x" * image_bytes},) * n,
                        item_ids=tuple(str(i) for i in range(n)), arrival_s=now,
                        deadline_s=now + 5.0)


def test_call_bytes_counts_the_strings_of_every_item() -> None:
    assert call_bytes(call(100, n=3)) == 300


async def _send(sizes: list[int], max_bytes: int | None) -> list[list[int]]:
    handle = RecordingHandle()
    c = Coalescer(handle, max_calls=32, max_bytes=max_bytes)
    await asyncio.gather(*(c.classify(call(s), 5.0) for s in sizes))
    return [[call_bytes(x) for x in batch] for batch in handle.sent]


def test_calls_of_one_turn_merge_while_they_fit_the_budget() -> None:
    assert asyncio.run(_send([400, 400, 400, 400], max_bytes=1000)) == [[400, 400], [400, 400]]


def test_a_call_larger_than_the_budget_travels_alone() -> None:
    assert asyncio.run(_send([100, 5000, 100], max_bytes=1000)) == [[100], [5000], [100]]


def test_without_a_budget_the_turn_travels_as_one_call() -> None:
    assert asyncio.run(_send([400, 400, 400], max_bytes=None)) == [[400, 400, 400]]


def test_a_body_limit_over_half_the_grpc_message_limit_is_refused() -> None:
    base: dict[str, Any] = {"classifiers": [{"name": "vit"}]}
    AppConfig.model_validate(base)  # the defaults fit (8 MiB bodies, 64 MiB messages)
    env = {GRPC_MESSAGE_ENV: str(4 * 1024 * 1024)}
    with pytest.raises(ValueError, match="at most half the gRPC message limit"):
        AppConfig.model_validate({**base, "request_path": {"replica_env": env}})
    AppConfig.model_validate({**base, "request_path": {"replica_env": env},
                              "http": {"max_body_bytes": 2 * 1024 * 1024}})
    AppConfig.model_validate({**base, "request_path": {"replica_env": env,
                                                       "handle_transport": "object_store"}})
