"""The generation deployments of the serving graph (`generation:` in the app's args): the LLM
stage and, disaggregated, the image encoders, bound for the ingress's `/v1/chat/completions`.

The builder trains (or finds cached) the VLM, or takes `generation.model_dir`, checks the
directory and takes its fingerprint; the stage replicas and the ingress get its path
(deployments/generation/model_files.py `ModelDir`, a few hundred bytes) and load from it on their
own node, each checking it holds the files the builder saw. The builder itself reads only what
it decides with (config.json) and a `generation.chat_template` override, whose text the ingress
gets."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ray.serve.deployment import Deployment

from deployments.generation.encoder import ImageEncoder
from deployments.generation.llm import LLMBackend
from deployments.generation.model_files import ModelDir
from deployments.generation.routers import token_router_config
from deployments.ingress.chat.config import GenerationConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatGraph:
    """What the ingress is handed: the settings, the model directory (its config, tokenizer and
    chat template render and count prompts), a chat template overriding the model's own (its
    text; None: the model's), the stage handles."""

    config: dict[str, Any]
    model: ModelDir
    chat_template: str | None
    llm: Any
    encoder: Any | None

    def probes(self) -> dict[str, Any]:
        out = {"LLMBackend": self.llm}
        if self.encoder is not None:
            out["ImageEncoder"] = self.encoder
        return out


def chat_model_dir(g: GenerationConfig, models_dir: Path) -> ModelDir:
    """`generation.model_dir`, or the project's VLM under `models_dir` (trained on first use);
    a missing or unreadable directory fails the start naming it."""
    if g.model_dir is not None:
        return ModelDir.at(g.model_dir, g.model)
    from deployments.models.vlm.cache import ensure_vlm

    return ModelDir.at(ensure_vlm(models_dir), g.model)


def llm_placement(g: GenerationConfig) -> dict[str, Any]:
    """A placement group per LLM replica where vLLM runs one model over several GPUs
    (`engine_kwargs.tensor_parallel_size` x `pipeline_parallel_size` > 1), as Ray Serve LLM
    does: the replica's own bundle (its `ray_actor_options`) and one GPU bundle per worker,
    packed; vLLM's Ray executor places its workers in it. None otherwise."""
    from deployments.engines.engine_args import parallel_devices

    devices = parallel_devices(g.engine_settings.get("engine_kwargs") or {})
    if g.engine != "vllm" or devices <= 1:
        return {}
    actor = g.llm.ray_actor_options
    own = {"CPU": float(actor.get("num_cpus", 1))}
    if actor.get("num_gpus"):
        own["GPU"] = float(actor["num_gpus"])
    return {"placement_group_bundles": [own] + [{"GPU": 1.0}] * devices,
            "placement_group_strategy": "PACK"}


def chat_template_override(path: str | None) -> str | None:
    """The text of `generation.chat_template`, a Jinja file replacing the model's own template
    (a missing or unreadable file fails the start, naming it); None: the model's own."""
    if path is None:
        return None
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise FileNotFoundError(f"generation.chat_template {path!r}: "
                                f"{exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"generation.chat_template {path!r}: not UTF-8 text ({exc})") from None


def context_len(g: GenerationConfig, model: ModelDir) -> int:
    """The engine's context: `engine_settings.max_model_len`, at most the model's positions."""
    positions = model.facts().max_position
    return min(int(g.engine_settings.get("max_model_len", positions)), positions)


def _deployment(cls: Any) -> Deployment:
    return cast(Deployment, cls)


def _rate_window(stage: Any) -> dict[str, float]:
    """The replicas' arrival-rate window (what they report to the autoscaler over)."""
    a = stage.autoscaling
    return {} if a is None else {"rate_window_s": a.rate_window_s}


def chat_scaling(g: GenerationConfig, model: ModelDir, profiles_dir: Path | None,
                 root: Path) -> dict[str, dict[str, Any]]:
    """The stages' replica options: fixed `num_replicas`, or Serve autoscaling with capacities
    from the config or the stage profile and initial sizes from history (app/autoscaling.py)."""
    from app import autoscaling as a

    if g.encoder.autoscaling is None and g.llm.autoscaling is None:
        return a.stage_options(g, {}, {})
    profiles = (a.load_stage_profiles(profiles_dir, g.model)
                if a.needs_stage_profile(g) and profiles_dir is not None else None)
    capacities = a.stage_capacities(g, profiles)
    initials = a.stage_initials(g, capacities, a.load_history(g.history, root),
                                model.tokens_per_image())
    log.info("autoscaled stages: capacity/replica %s, initial %s",
             {k: round(v, 1) for k, v in capacities.items()}, initials)
    return a.stage_options(g, capacities, initials)


def bind_chat(g: GenerationConfig, model: ModelDir, actor_options: Any,
              profiles_dir: Path | None = None, root: Path | None = None) -> ChatGraph:
    """`actor_options(options) -> options`: the builder's env merging for every replica;
    `profiles_dir`: where the stage profile is (autoscaling capacities); `root`: what a
    relative `history` path is relative to (default: the working directory)."""
    facts = model.facts()
    if g.engine == "vllm" and g.mode == "disaggregated" and facts.adapter == "llava_tiled":
        from deployments.engines.vllm_engine import EMBEDS_REFUSED

        raise ValueError(f"generation.model {g.model!r} ({facts.model_type}): {EMBEDS_REFUSED}")
    template = chat_template_override(g.chat_template)
    engine_settings = {**g.engine_settings, "max_model_len": context_len(g, model)}
    if g.engine == "vllm" and engine_settings.get("engine_kwargs"):
        from deployments.engines.engine_args import check_engine_kwargs, vllm_arg_names

        check_engine_kwargs(engine_settings["engine_kwargs"], vllm_arg_names())
    scaling = chat_scaling(g, model, profiles_dir, root or Path.cwd())
    llm = _deployment(LLMBackend).options(
        **scaling["llm"], **llm_placement(g), max_ongoing_requests=g.llm.max_ongoing_requests,
        request_router_config=token_router_config(
            "prompt_tokens" if g.routing == "token" else "pow2"),
        ray_actor_options=actor_options(g.llm.ray_actor_options),
        logging_config={"enable_access_log": False},
    ).bind(model, {"engine": g.engine, "engine_settings": engine_settings,
                   "monolith": g.mode == "monolith", "priority": g.priority,
                   **_rate_window(g.llm)})
    encoder = None
    if g.mode == "disaggregated" and facts.takes_images:  # text-only: no encoder stage
        e = g.encoder
        encoder = _deployment(ImageEncoder).options(
            **scaling["encoder"], max_ongoing_requests=e.max_ongoing_requests,
            request_router_config=token_router_config(
                "image_tokens" if g.routing == "token" else "pow2"),
            ray_actor_options=actor_options(e.ray_actor_options),
            logging_config={"enable_access_log": False},
        ).bind(model, {"max_batch_images": e.max_batch_images,
                       "max_queued_images": e.max_queued_images, "priority": g.priority,
                       **_rate_window(e)})
    log.info("chat model %s (%s, %s engine) at %s, fingerprint %s", g.model, g.mode, g.engine,
             model.path, model.fingerprint[:16])
    config = {**g.model_dump(mode="json"), "context_len": engine_settings["max_model_len"]}
    return ChatGraph(config, model, template, llm, encoder)
