"""The optional preprocess deployment (`request_path.decode_at: preprocess`): decode wire
inputs in replicas of their own, then forward the tensors to the family's classifier and return
its answers. By default the classifier replicas decode their own requests (one hop and one
serialisation less per call); a separate decode stage pays off where decoding dominates (large
images) and should scale apart from the model replicas.

Decoding needs only each family's `decode`, but decode lives on the `ServableModel`, so the
replica loads every served family on the CPU from the paths the builder hands it (loaded once per
replica, checked against the builder's fingerprint). Decoding runs
on a worker thread so one large input does not stall the replica's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import torch
from ray import serve

from deployments.decode import deadline_lost, decode_items, lost_results, warm_decode, work_items
from deployments.dispatch import submit_with_deadline
from deployments.handles import Transport, warm_handles, with_transport
from deployments.models.loading import ModelRef
from deployments.wire import ClassifyCall, ClassifyOutcome, DecodeResult, InputProblem

log = logging.getLogger(__name__)


def to_wire(tensors: dict[str, Any]) -> dict[str, Any]:
    """CPU tensors as numpy arrays for the trip to the classifier: Ray pickles each torch tensor
    through torch's own reducer (~0.2 ms per tensor, 6 ms for a job of 32 items, on each side),
    a numpy array in microseconds. The classifier turns them back into tensors."""
    return {k: v.numpy() if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v
            for k, v in tensors.items()}


@serve.deployment(max_ongoing_requests=1000)
class Preprocess:
    # async: lets the replica start warming its handles in the background
    async def __init__(self, models: dict[str, ModelRef],  # type: ignore[misc]
                       classifiers: dict[str, Any], grace_s: float,
                       transport: Transport = "grpc") -> None:
        """`models`: family -> where its model files are, for every family served."""
        torch.set_num_threads(1)
        from deployments.models.loading import load_ref

        self.models = {name: await asyncio.to_thread(load_ref, ref, "cpu")
                       for name, ref in models.items()}
        self.classifiers = {n: with_transport(h, transport) for n, h in classifiers.items()}
        self.grace_s = grace_s
        await asyncio.to_thread(warm_decode, self.models)
        self._warm = asyncio.get_running_loop().create_task(warm_handles(self.classifiers, set()))
        log.info("preprocess ready for %s", sorted(self.models))

    def ping(self) -> str:
        """Cheap call the ingress uses to warm its handle."""
        return "preprocess"

    async def decode(self, call: ClassifyCall) -> DecodeResult:
        model = self.models.get(call.family)
        if model is None:
            return DecodeResult(problem=InputProblem(
                "unknown_model", f"model {call.family!r} is not served; valid: "
                f"{sorted(self.models)}", "model"))
        return await asyncio.to_thread(decode_items, model, call.task, call.inputs,
                                       deadline_lost(call))

    async def classify(self, call: ClassifyCall) -> ClassifyOutcome:
        """Decode, then queue at the family's classifier; one result per item, in order. A call
        whose deadline is lost (before or while decoding, e.g. after waiting for a decode
        thread) is answered deadline_exceeded without decoding or sending the rest."""
        if deadline_lost(call)():
            return ClassifyOutcome(results=lost_results(call))
        decoded = await self.decode(call)
        if decoded.problem is not None:
            return ClassifyOutcome(problem=decoded.problem)
        if decoded.deadline_lost or deadline_lost(call)():
            return ClassifyOutcome(results=lost_results(call))
        items = work_items(call, decoded.items, to_wire)
        results = await submit_with_deadline(self.classifiers[call.family], items, self.grace_s)
        return ClassifyOutcome(results=tuple(results))

    async def classify_many(self, calls: list[ClassifyCall]) -> list[ClassifyOutcome]:
        """Calls the ingress coalesced into one handle call (deployments/ingress/classify/coalesce.py):
        each answered as `classify` would, in order."""
        return list(await asyncio.gather(*(self.classify(c) for c in calls)))
