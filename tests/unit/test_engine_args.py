"""The engines' settings are checked where the config is loaded (deployments/engines/
engine_args.py): a misspelt name or a value out of range fails the app's start, naming it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deployments.engines.engine_args import OWN_ARGS, check_engine_kwargs, check_engine_settings
from deployments.ingress.chat.config import GenerationConfig

FIELDS = ["tensor_parallel_size", "quantization", "kv_cache_dtype", "enable_prefix_caching",
          "max_num_batched_tokens", *OWN_ARGS]


def test_vllm_arguments_pass_when_they_are_vllms() -> None:
    check_engine_kwargs({"tensor_parallel_size": 2, "enable_prefix_caching": True}, FIELDS)


def test_a_misspelt_argument_names_the_closest_ones() -> None:
    with pytest.raises(ValueError, match="'tensor_paralel_size' is not an argument") as err:
        check_engine_kwargs({"tensor_paralel_size": 2}, FIELDS)
    assert "did you mean 'tensor_parallel_size'" in str(err.value)


def test_what_the_server_sets_says_where_to_set_it() -> None:
    with pytest.raises(ValueError, match="'max_num_seqs' is set by engine_settings.max_num_seqs"):
        check_engine_kwargs({"max_num_seqs": 4}, FIELDS)


def test_engine_settings_are_checked_at_config_load() -> None:
    GenerationConfig(engine_settings={"max_num_seqs": 8, "engine_kwargs": {"seed": 1}})
    with pytest.raises(ValidationError, match="max_num_seq"):
        GenerationConfig(engine_settings={"max_num_seq": 8})
    with pytest.raises(ValidationError, match="unknown transformers engine settings"):
        GenerationConfig(engine="transformers", engine_settings={"max_num_seqs": 8})
    GenerationConfig(engine="transformers", engine_settings={"trust_remote_code": True})
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        check_engine_settings("tgi", {})


@pytest.mark.slow
def test_the_installed_vllm_takes_the_names_we_document() -> None:
    """Against the installed vLLM's AsyncEngineArgs (imports vllm)."""
    pytest.importorskip("vllm")
    from deployments.engines.engine_args import vllm_arg_names

    names = vllm_arg_names()
    check_engine_kwargs({"tensor_parallel_size": 1, "quantization": None, "kv_cache_dtype":
                         "auto", "enable_prefix_caching": True, "max_num_batched_tokens": 2048,
                         "trust_remote_code": False}, names)
    assert set(OWN_ARGS) <= set(names)  # what we set is still vLLM's


def test_a_model_over_several_gpus_gets_a_placement_group_per_replica() -> None:
    """As Ray Serve LLM's: the replica's bundle, then one GPU per vLLM worker, packed; vLLM's
    Ray executor unless named. One device: nothing added."""
    from app.chat_graph import llm_placement
    from deployments.engines.vllm_engine import _with_executor

    tp2 = GenerationConfig(engine_settings={"engine_kwargs": {"tensor_parallel_size": 2}},
                           llm={"ray_actor_options": {"num_cpus": 2}})
    assert llm_placement(tp2) == {"placement_group_bundles": [{"CPU": 2.0}, {"GPU": 1.0},
                                                              {"GPU": 1.0}],
                                  "placement_group_strategy": "PACK"}
    assert _with_executor({"tensor_parallel_size": 2})["distributed_executor_backend"] == "ray"
    assert _with_executor({"tensor_parallel_size": 2, "distributed_executor_backend": "mp"})[
        "distributed_executor_backend"] == "mp"
    assert llm_placement(GenerationConfig()) == {} and _with_executor({}) == {}
    assert llm_placement(GenerationConfig(engine="transformers")) == {}
