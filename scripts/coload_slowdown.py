"""How much busy neighbours slow the model: a variant at one batch size (one torch thread)
alone, then beside N busy-loop processes (the live benchmark's co-located serving stack in its
simplest form). Prints one line and writes JSON.

    .venv/bin/python scripts/coload_slowdown.py --busy 1 --out results/coload.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def p50_ms(model: Any, variant: Any, task: str, items: list[Any], calls: int = 40) -> float:
    for _ in range(5):
        model.run(variant, task, items)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        model.run(variant, task, items)
        times.append((time.perf_counter() - t) * 1000)
    return sorted(times)[calls // 2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--family", default="family")
    p.add_argument("--variant", default="family/cnn-xl")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the model")
    p.add_argument("--models-dir", type=Path, default=Path(".cache/models"))
    p.add_argument("--out", type=Path, default=Path("results/coload.json"))
    a = p.parse_args()

    import torch

    from deployments.models.registry import load_model

    torch.set_num_threads(1)
    model = load_model(a.family, cache_dir=a.models_dir, device="cpu")
    task = model.tasks()[0]
    items = [model.decode(e.inputs, task) for e in model.examples("test", task, limit=a.batch)]
    variant = next(v for v in model.variants() if v.name == a.variant)
    alone = p50_ms(model, variant, task, items)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(a.busy)]
    try:
        time.sleep(1.0)
        loaded = p50_ms(model, variant, task, items)
    finally:
        for b in burners:
            b.kill()
    out = {"variant": a.variant, "batch": a.batch, "busy": a.busy, "alone_p50_ms": alone,
           "loaded_p50_ms": loaded, "slowdown": loaded / alone}
    print(f"{a.variant} b={a.batch} p50 alone {alone:.1f} ms, beside {a.busy} busy "
          f"process(es) {loaded:.1f} ms: x{loaded / alone:.2f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
