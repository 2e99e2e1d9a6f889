"""The image encoder stage (ModServe's image instances): decode + preprocess + vision tower +
projector, loaded from the model directory's path on the replica's node (model_files.py), images
batched across requests in deadline order (encoder_loop.py). A call carries a group of a
request's images (the ingress splits a request's images into one group per encoder replica), so
the images of one request fan out across the replicas and are encoded in parallel. The group's
embeddings stay in this replica's object store as one tensor; the answer carries a reference the
LLM stage pulls."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

import ray
from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from deployments.autoscaling.decisions import IMAGE_TOKENS, SLO_ATTAINMENT
from deployments.autoscaling.reporting import ArrivalRates
from deployments.generation.encoder_loop import EncoderLoop, QueueFull
from deployments.generation.model_files import ModelDir
from deployments.generation.routers import ReportsPendingTokens
from deployments.generation.stage_messages import EncodedImage, ImageCall
from deployments.generation.vision import image_group, load_vision_encoder, open_image
from deployments.models.base import InputError, UnsupportedMediaType
from policies.autoscaling.meter import ShareSinceLast

log = logging.getLogger(__name__)


class EncoderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch_images: int = Field(8, ge=1)
    max_queued_images: int = Field(256, ge=1)
    torch_threads: int = Field(1, ge=1)
    priority: Literal["deadline", "fifo"] = "deadline"
    # how long an answer's embeddings stay held here after its TTFT deadline (see HeldRefs)
    hold_after_deadline_s: float = Field(30.0, gt=0)
    rate_window_s: float = Field(5.0, gt=0)  # the autoscaler's arrival-rate window


@serve.deployment(max_ongoing_requests=512)
class ImageEncoder(ReportsPendingTokens):
    def __init__(self, model: ModelDir, settings: dict[str, Any]) -> None:
        """`model`: loaded from its path on this node, once checked to hold the builder's
        files (`ModelDir.verified`)."""
        import torch
        from PIL import Image

        self.settings = EncoderSettings.model_validate(settings)
        torch.set_num_threads(self.settings.torch_threads)
        model = model.verified()
        self.vision = load_vision_encoder(model.path)
        self.loop = EncoderLoop(self.vision.encode, self.settings.max_batch_images,
                                self.settings.max_queued_images)
        self.held = HeldRefs()
        self.tokens_per_image = model.tokens_per_image()
        self.arrivals = ArrivalRates((IMAGE_TOKENS,), self.settings.rate_window_s)
        self.attainment = ShareSinceLast()
        self.loop.warm(Image.new("RGB", (64, 64)))
        log.info("image encoder ready (%s at %s), batch times %s", model.name, model.path,
                 {n: round(s * 1000, 2) for n, s in self.loop.times.seconds.items()})

    async def encode(self, call: ImageCall) -> EncodedImage:
        self.arrivals.add(IMAGE_TOKENS, call.route_tokens or len(call.data) * self.tokens_per_image)
        with self.holding_tokens(call):  # the image token router's count (routers.py)
            return await self._encode(call)

    async def _encode(self, call: ImageCall) -> EncodedImage:
        start = time.time()
        try:
            pixels = [open_image(data, f"image {call.index + k}")
                      for k, data in enumerate(call.data)]
        except UnsupportedMediaType as exc:
            return EncodedImage("unsupported_media_type", message=str(exc))
        except InputError as exc:
            return EncodedImage("invalid_input", message=str(exc))
        fifo = self.settings.priority == "fifo"
        try:  # each image queued on its own: they batch with other requests' images
            embs = await asyncio.gather(*[
                self.loop.submit(f"{call.request_id}/{call.index + k}", p, call.deadline_s,
                                 call.after_s, fifo=fifo) for k, p in enumerate(pixels)])
        except QueueFull as exc:
            return EncodedImage("overloaded", message=str(exc))
        except Exception as exc:
            return EncodedImage("error", message=f"encoding failed: {type(exc).__name__}")
        if any(emb is None for emb in embs):
            return EncodedImage("deadline_exceeded",
                                message="the TTFT deadline was lost before this image ran")
        group, tokens = image_group(embs)  # one object to pull
        done = time.time()
        ref = ray.put(group)
        self.held.hold(ref, max(call.deadline_s, done) + self.settings.hold_after_deadline_s)
        return EncodedImage("ok", (ref,), tokens, encode_ms=(done - start) * 1000.0)

    def ping(self) -> str:
        return "pong"

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Serve's autoscaler (deployments/autoscaling/): image tokens/s arriving here, and the
        share of images encoded within their deadline since the last report (when any ran)."""
        out = self.arrivals.rates()
        share = self.attainment.take(self.loop.encoded, self.loop.expired)
        if share is not None:
            out[SLO_ATTAINMENT] = share
        return out

    def stats(self) -> dict[str, Any]:
        return {"pending": self.loop.pending, "encoded": self.loop.encoded,
                "expired": self.loop.expired, "held_refs": len(self.held),
                "batch_ms": {n: s * 1000 for n, s in self.loop.times.seconds.items()}}


class HeldRefs:
    """The embeddings this replica answered with, kept referenced here until a while after
    their request's TTFT deadline. Serve hands a replica's answer to the caller serialized, so
    Ray does not see the ingress (and then the LLM replica) borrow the reference inside it:
    once this replica dropped its own reference, the object could be freed before the LLM
    pulled it (ReferenceCountingAssertionError under load). Holding it past the deadline
    covers every pull that can still matter; expired ones are let go as new ones come."""

    def __init__(self) -> None:
        self._refs: list[tuple[float, Any]] = []  # (release at, ref), in insertion order

    def hold(self, ref: Any, until_s: float) -> None:
        now = time.time()
        self._refs = [(t, r) for t, r in self._refs if t > now]
        self._refs.append((until_s, ref))

    def __len__(self) -> int:
        return len(self._refs)
