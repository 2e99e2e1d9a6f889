"""The stages sharing the machine's cores with the live path (bench/experiments/fidelity/generation/shared_cores.py,
the `stretch` hook of the simulator's stages, `PathCosts.stages_share`), on hand cases with the
toy profiles of tests/helpers/generation_toys.py (an image encodes in 10 ms; a prefill of n tokens takes
5 + 0.1 (n - 1) ms)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.sim.generation.config import GenSimConfig, ServePath, StageConfig
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import GenerationSim
from bench.experiments.fidelity.generation.fit import HEADLINE, is_measured, path_processes
from bench.experiments.fidelity.generation.live_path import LiveGenerationSim, PathCosts
from bench.experiments.fidelity.generation.shared_cores import (
    Occupancy,
    StageContention,
    job_rate,
    processor_sharing,
)
from tests.helpers.generation_toys import prefill, toy

MONO = GenSimConfig(ServePath.MONOLITH, StageConfig(1))
DISAGG = GenSimConfig(ServePath.DISAGGREGATED, StageConfig(1), StageConfig(1))


def test_occupancy_counts_the_open_intervals() -> None:
    occ = Occupancy.of([0.0, 1.0, 2.0], [2.0, 3.0, 2.0])  # the last one is empty
    assert [occ.at(t) for t in (-1.0, 0.0, 0.5, 1.0, 1.99, 2.0, 2.5, 3.0, 9.0)] == \
        [0, 1, 1, 2, 2, 1, 1, 0, 0]
    assert Occupancy.of([], []).at(0.0) == 0


def test_path_work_runs_on_at_most_its_processes_threads() -> None:
    # three jobs of 1 s on 2 cores: one thread each -> 2/3 of a core each, done at 1.5 s;
    # all in one process (one thread) -> that thread's core shared by three, done at 3 s
    assert processor_sharing([0.0] * 3, [1.0] * 3, 2.0).tolist() == pytest.approx([1.5] * 3)
    assert processor_sharing([0.0] * 3, [1.0] * 3, 2.0, threads=1).tolist() == \
        pytest.approx([3.0] * 3)
    # two processes beside one busy competitor: 2 threads on 2 cores with 1 more -> 2/3 each,
    # 4/3 cores shared by 4 jobs
    assert job_rate(4, 2.0, 1.0, threads=2) == pytest.approx(1 / 3)
    assert job_rate(1, 2.0, 1.0, threads=2) == job_rate(1, 2.0, 1.0) == 1.0
    assert processor_sharing([0.0], [1.0], 1.0, competitors=1.0, threads=3).tolist() == [2.0]


def test_a_stage_thread_gets_its_share_of_the_cores() -> None:
    path = Occupancy.of([0.0, 0.0, 0.0], [1.0, 1.0, 2.0])  # 3 path jobs, then 1, then none
    c = StageContention(host_cores=2.0, occupancy=path, background=0.0, engine_cores=1.0)
    assert c("llm", 5.0) == 1.0  # alone (1 thread on 2 cores)
    assert c("llm", 0.5) == pytest.approx(2.0)  # 1 + 3 threads on 2 cores: half a core
    assert c("llm", 1.5) == 1.0  # 1 + 1 threads: a core each
    assert c("encoder", 1.5) == pytest.approx(1.5)  # + the engine's busy core: 3 on 2
    busy = replace(c, background=2.0)
    assert busy("llm", 5.0) == pytest.approx(1.5)
    # the path's 3 requests run in one process: one runnable thread beside the stage's
    assert replace(c, path_threads=1.0)("llm", 0.5) == 1.0
    with pytest.raises(ValueError, match="valid"):
        c("proxy", 0.0)
    with pytest.raises(ValueError, match="host_cores"):
        StageContention(0.0, path, 0.0, 0.0)
    with pytest.raises(ValueError, match="host_cores"):
        StageContention(2.0, path, -1.0, 0.0)
    with pytest.raises(ValueError, match="host_cores"):
        StageContention(2.0, path, 0.0, 0.0, path_threads=-1.0)


def test_the_stretch_hook_lengthens_each_stage_step() -> None:
    text, image = GenRequest(0.0, 100, 0, 1), GenRequest(0.0, 100, 1, 1)
    assert GenerationSim([text], toy(), MONO).run().ttft_ms()[0] == pytest.approx(prefill(100))
    doubled = GenerationSim([text], toy(), MONO, stretch=lambda stage, now: 2.0).run()
    assert doubled.ttft_ms()[0] == pytest.approx(2 * prefill(100))
    # disaggregated: only the encoder's batch slows (10 ms -> 30 ms), then the prefill of the
    # 100 text + 100 image tokens
    only_enc = GenerationSim([image], toy(), DISAGG,
                             stretch=lambda stage, now: 3.0 if stage == "encoder" else 1.0).run()
    assert only_enc.ttft_ms()[0] == pytest.approx(30.0 + prefill(200))


def test_stages_share_the_cores_with_the_path_work_present_when_they_run() -> None:
    # a text request with no path, and a one-image request whose path is 40 ms of CPU on the
    # one host core: the text request's prefill runs beside it at half a core
    reqs = [GenRequest(0.0, 100, 0, 1), GenRequest(0.0, 100, 1, 1)]
    costs = PathCosts(per_hop_ms=40.0, cpu_share=1.0, host_cores=1.0)
    plain = LiveGenerationSim(reqs, toy(), MONO, costs).run().ttft_ms()
    shared = LiveGenerationSim(reqs, toy(), MONO, replace(costs, stages_share=True)).run()
    assert plain[0] == pytest.approx(prefill(100))
    assert shared.ttft_ms()[0] == pytest.approx(2 * prefill(100))
    # the image request reaches the stage at 40 ms, when no path work is left: no stretch
    assert shared.ttft_ms()[1] == pytest.approx(plain[1])
    # no contention model (host_cores 0): stages_share changes nothing
    free = replace(costs, host_cores=0.0, stages_share=True)
    assert LiveGenerationSim(reqs, toy(), MONO, free).contention is None


def test_the_fidelity_figure_judges_the_shared_stages_model_with_the_layouts_processes() -> None:
    settings = {"llm_replicas": 1, "encoder_replicas": 2}
    assert path_processes("monolith", settings) == 3  # proxy, ingress, LLM replica
    assert path_processes("full", settings) == 5  # + the two encoders
    assert HEADLINE({"stages": 0, "path": 0, "shared": 0, "shared+stages": 0}) == "shared+stages"
    assert HEADLINE({"stages": 0, "path": 0}) == "path"  # no CPU measured
    assert is_measured({"systems": {"monolith": {"phases": []}}})
    assert not is_measured({"systems": {"monolith": {"ramp": []}}})
