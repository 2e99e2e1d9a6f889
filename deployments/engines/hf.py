"""The transformers engine: a LLaVA-style (1.5, NeXT, OneVision) or Qwen2-VL / Qwen2.5-VL model's decode with a KV cache (greedy or sampled as the
request's `Sampling` says, stop sequences held back until recognised), streamed token by
token, for models vLLM does not take (and as the reference the vLLM engine is tested against).

One request runs at a time (no batching), lowest priority value first. Each model step runs on
one worker thread, so the replica's event loop keeps serving between steps, and a cancelled
request stops at its next step. Images come as embeddings (the encoder stage's output:
[tokens, hidden], or `GridEmbeds` for Qwen-VL) or as PIL images, which the engine encodes with
the model's own vision tower. Qwen-VL's prefill is the model's own forward (its M-RoPE positions
follow the images' grids); its decode steps continue from the positions it left.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from deployments.engines.base import (
    EngineError,
    EngineInfo,
    GenerationRequest,
    PromptTooLong,
    TokenDelta,
)
from deployments.engines.choose_token import choose_token, generator_for
from deployments.engines.image_inputs import GridEmbeds, expand_placeholders, image_tokens
from deployments.engines.model_dir import read_model_dir
from deployments.engines.sampling import Sampling, cut_at_stop
from deployments.engines.turns import Turns

log = logging.getLogger(__name__)


@dataclass
class _Run:
    cache: Any
    token: int  # the last token chosen
    ids: list[int]  # tokens generated so far


class TransformersEngine:
    def __init__(self, model_dir: str | Path, max_model_len: int | None = None,
                 trust_remote_code: bool = False) -> None:
        facts = read_model_dir(model_dir)
        self._facts = facts
        self._remote = {"trust_remote_code": trust_remote_code}  # the model's own code
        self.info = EngineInfo(name="transformers", model_dir=str(model_dir),
                               max_model_len=max_model_len or facts.max_position,
                               tokens_per_image=facts.tokens_per_image,
                               image_hidden=facts.text_hidden, image_token="")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf-engine")
        self._turns = Turns()
        self._model: Any = None
        self._tok: Any = None
        self._images: Any = None
        self._body: Any = None  # the decoder stack the KV cache steps through
        self._vision: Any = None  # Qwen-VL: its vision tower (PIL images -> GridEmbeds)
        self._tiled: Any = None  # LLaVA-NeXT / OneVision: PIL images -> [tokens, hidden] each

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, self._load)

    def _load(self) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = self._facts.path
        self._tok = AutoTokenizer.from_pretrained(path, **self._remote)
        if self._facts.adapter == "llava":
            from transformers import AutoImageProcessor, LlavaForConditionalGeneration

            self._images = AutoImageProcessor.from_pretrained(path, **self._remote)
            model = LlavaForConditionalGeneration.from_pretrained(path, dtype=torch.float32,
                                                                  **self._remote)
            self._body = model.model.language_model
        elif self._facts.adapter == "llava_tiled":
            from deployments.engines.llava_tiled import TiledVisionTower
            from deployments.engines.vision_part import load_image_text_model

            model = load_image_text_model(path, self._remote["trust_remote_code"])
            self._tiled = TiledVisionTower(path, model, self._remote["trust_remote_code"])
            self._body = model.model.language_model
        elif self._facts.adapter == "qwen_vl":
            from deployments.engines.qwen_vl import QwenVisionTower
            from deployments.engines.vision_part import load_image_text_model

            remote = self._remote["trust_remote_code"]
            model = load_image_text_model(path, remote)
            self._vision = QwenVisionTower(path, model, remote)
            self._body = model.model  # takes the images itself (mm_encoder_outputs)
        else:  # a text-only causal LM: its decoder body and head
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                         **self._remote)
            self._body = model.model
        self._model = model.eval()
        image_id = self._facts.image_token_id
        token = "" if image_id is None else self._tok.convert_ids_to_tokens(image_id)
        self.info = EngineInfo(**{**self.info.__dict__, "image_token": token})
        log.info("transformers engine loaded %s", path)

    def prompt_ids(self, prompt: str, image_tokens: Sequence[int]) -> list[int]:
        """The prompt's token ids with each image placeholder expanded to its image's tokens."""
        ids = self._tok(prompt, add_special_tokens=False)["input_ids"]
        return expand_placeholders(ids, self._facts.image_token_id, image_tokens)

    def prompt_tokens(self, prompt: str, image_tokens: Sequence[int]) -> int:
        return len(self.prompt_ids(prompt, image_tokens))

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TokenDelta]:
        ids = self.prompt_ids(request.prompt, image_tokens(self._facts, request.images))
        if len(ids) + request.max_tokens > self.info.max_model_len:
            raise PromptTooLong(f"prompt of {len(ids)} tokens + max_tokens {request.max_tokens} "
                                f"exceeds the context of {self.info.max_model_len}")
        loop = asyncio.get_running_loop()
        sampling = request.sampling
        generator = generator_for(sampling)
        await self._turns.acquire(request.priority)
        try:
            run = await loop.run_in_executor(self._pool, self._prefill, ids, request.images,
                                             sampling, generator)
            sent = ""  # text streamed so far
            eos = None if sampling.ignore_eos else self._tok.eos_token_id
            while True:
                full = self._tok.decode(run.ids, skip_special_tokens=True)
                cut = cut_at_stop(full, sampling.stop) if sampling.stop else None
                if cut is not None or run.token == eos or len(run.ids) >= request.max_tokens:
                    reason = "length" if cut is None and run.token != eos else "stop"
                    end = len(full) if cut is None else max(cut, len(sent))
                    yield TokenDelta(full[len(sent):end], (run.token,), True, reason, len(ids),
                                     len(run.ids))
                    return
                ready = len(full) - sampling.held_back_chars()
                delta = full[len(sent):ready] if ready > len(sent) else ""
                sent += delta
                yield TokenDelta(delta, (run.token,))
                run = await loop.run_in_executor(self._pool, self._step, run, sampling,
                                                 generator)
        finally:
            self._turns.release()

    def _features(self, images: tuple[Any, ...]) -> torch.Tensor | None:
        if not images:
            return None
        if all(isinstance(x, torch.Tensor) for x in images):
            return torch.cat([x.reshape(-1, x.shape[-1]) for x in images]).float()
        if any(isinstance(x, torch.Tensor) for x in images):
            raise EngineError("a request's images must be all embeddings or all pixels")
        if self._tiled is not None:
            return torch.cat(self._tiled.encode(images))
        pixels = self._images(list(images), return_tensors="pt")["pixel_values"]
        feats = self._model.model.get_image_features(pixel_values=pixels,
                                                     return_dict=True).pooler_output
        return torch.cat(list(feats))

    @torch.inference_mode()
    def _prefill(self, ids: list[int], images: tuple[Any, ...], sampling: Sampling,
                 generator: torch.Generator | None) -> _Run:
        from transformers import DynamicCache

        if self._vision is not None:
            return self._qwen_prefill(ids, images, sampling, generator)
        input_ids = torch.tensor([ids])
        emb = self._model.get_input_embeddings()(input_ids)
        feats = self._features(images)
        if feats is not None:
            mask = (input_ids == self._facts.image_token_id).unsqueeze(-1)
            if int(mask.sum()) != feats.shape[0]:
                raise EngineError(f"{int(mask.sum())} image tokens for {feats.shape[0]} "
                                  "image embeddings")
            emb = emb.masked_scatter(mask, feats.to(emb.dtype))
        out = self._body(inputs_embeds=emb, past_key_values=DynamicCache(), use_cache=True)
        logits = self._model.lm_head(out.last_hidden_state[:, -1])
        token = choose_token(logits, sampling, [], generator)
        return _Run(out.past_key_values, token, [token])

    def _qwen_prefill(self, ids: list[int], images: tuple[Any, ...], sampling: Sampling,
                      generator: torch.Generator | None) -> _Run:
        from transformers import DynamicCache

        from deployments.engines.qwen_vl import prefill_inputs

        if all(isinstance(x, GridEmbeds) for x in images):
            embeds = list(images)
        elif any(isinstance(x, GridEmbeds | torch.Tensor) for x in images):
            raise EngineError("a Qwen-VL request's images must be all GridEmbeds or all pixels")
        else:
            embeds = self._vision.encode(images)
        assert self._facts.image_token_id is not None
        self._body.rope_deltas = None  # positions start afresh (no other request's offset)
        out = self._body(**prefill_inputs(ids, self._facts.image_token_id, embeds),
                         past_key_values=DynamicCache(), use_cache=True)
        logits = self._model.lm_head(out.last_hidden_state[:, -1])
        token = choose_token(logits, sampling, [], generator)
        return _Run(out.past_key_values, token, [token])

    @torch.inference_mode()
    def _step(self, run: _Run, sampling: Sampling, generator: torch.Generator | None) -> _Run:
        out = self._body(input_ids=torch.tensor([[run.token]]), past_key_values=run.cache,
                         use_cache=True)
        logits = self._model.lm_head(out.last_hidden_state[:, -1])
        token = choose_token(logits, sampling, run.ids, generator)
        return _Run(out.past_key_values, token, [*run.ids, token])

    async def abort(self, request_id: str) -> None:
        """Requests stop when their generator is closed or cancelled; nothing else to free."""

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
