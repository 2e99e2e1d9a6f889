"""VllmEngine.shutdown leaves no ZMQ context open: AsyncLLM.shutdown() outside its event loop
only schedules its sockets' closing on that loop, and where the loop never runs again the
context's garbage collection blocks forever in `Context.term` (a CI run stalled so in an
unrelated test). Checked on real zmq sockets standing in for vLLM's client resources."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace

import zmq
import zmq.asyncio

from deployments.engines.vllm_engine import _close_zmq


def test_sockets_and_context_closed_outside_the_loop() -> None:
    loop = asyncio.new_event_loop()
    ctx = zmq.asyncio.Context(zmq.Context(io_threads=1))
    push = ctx.socket(zmq.PUSH)
    push.connect("tcp://127.0.0.1:1")  # never answered
    pull = ctx.socket(zmq.PULL)
    resources = SimpleNamespace(ctx=ctx, output_socket=pull, input_socket=push,
                                first_req_send_socket=None, first_req_rcv_socket=None,
                                stats_update_socket=None)
    loop.close()  # the loop is gone, as after a test's or a replica's last
    _close_zmq(SimpleNamespace(engine_core=SimpleNamespace(resources=resources)))
    assert push.closed and pull.closed and ctx.closed
    del ctx, push, pull, resources
    gc.collect()


def test_a_client_without_resources_is_left_alone() -> None:
    _close_zmq(SimpleNamespace())
    _close_zmq(SimpleNamespace(engine_core=SimpleNamespace()))
