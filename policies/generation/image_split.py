"""How a request's images are split over the encoder replicas (ModServe section 4.3: "large
requests are distributed across multiple Image Instances for parallel processing"): at most one
group per replica, consecutive (the embeddings come back in prompt order), sizes within one.
The live ingress (deployments/generation/pipeline.py) and the simulator
(app/sim/generation/encoder.py) both split with `image_groups`; each group is then routed on
its own (policies.generation.token_routing)."""

from __future__ import annotations


def image_groups(n: int, fan_out: int) -> list[tuple[int, int]]:
    """[start, stop) of at most `fan_out` consecutive groups of n images, sizes within one."""
    groups = max(1, min(n, fan_out))
    bounds = [round(i * n / groups) for i in range(groups + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
