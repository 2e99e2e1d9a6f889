"""`python -m bench family-shapes`: what candidate architectures for the built-in
model-selection family cost here, beside the serving path's own CPU per request, and which
ladders of them meet the shape rules a family must have before its figures are run:

- the most accurate variant's forward at batch 1 (one thread, as a replica runs it) >= 3x the
  serving path's CPU per request (`--path-ms`: 13.9-16 ms per classify request on this machine,
  docs/front.md), so that the model, not the path, is what runs out;
- the cheapest variant's <= 1/8 of the most accurate's (the RAMSIS paper's image ladder spans
  16x: shufflenet_v2_x0_5 20 ms to efficientnet_v2_l 322 ms, ../shared/data/ramsis/derived/);
- what training costs per image (batched, the machine's threads), since all three families must
  train within ~10 minutes on 2 cores.

Random-init timm models on grey (1-channel) inputs, 10 classes; no data, no accuracy (that is the
family's training's to measure on held-out data). Prints a table and writes a Result.

`--trained NAME`: a trained built-in family measured the same way, each variant through the served
code, beside its held-out accuracy, judged by its kind's rules: the ladder's (above, and accuracy
rising with cost, >= 10 points between the ends); the scenes fusion's (the dearest single modality
>= 3x the cheapest); the scenes ViT's (`gamma_checks`)."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.core.result import Check, Run

# (timm architecture, input side in pixels): small to large, CNNs and a ViT
CANDIDATES = (
    ("mobilenetv3_small_050", 32), ("mobilenetv3_small_100", 48), ("resnet10t", 48),
    ("resnet18", 48), ("resnet18", 64), ("efficientnet_b0", 64), ("resnet34", 64),
    ("resnet50", 64), ("resnet50", 96), ("efficientnet_b0", 96), ("vit_small_patch8_224", 64),
    ("convnext_atto", 96),
)


def build(arch: str, px: int) -> Any:
    import timm

    kwargs: dict[str, Any] = {"img_size": px} if arch.startswith("vit") else {}
    return timm.create_model(arch, pretrained=False, num_classes=10, in_chans=1, **kwargs)


def forward_ms(model: Any, px: int, repeats: int) -> float:
    """Median batch-1 forward time on one thread (eval, no grad)."""
    import torch

    torch.set_num_threads(1)
    model.eval()
    x = torch.randn(1, 1, px, px)
    times = []
    with torch.inference_mode():
        for k in range(repeats + 3):
            t = time.perf_counter()
            model(x)
            if k >= 3:
                times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def train_ms_per_image(model: Any, px: int, threads: int, batch: int = 32) -> float:
    """Median time per image of a training step (forward, backward, SGD) on `threads`."""
    import torch

    torch.set_num_threads(threads)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, 1, px, px), torch.randint(0, 10, (batch,))
    times = []
    for k in range(4):
        t = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if k >= 1:
            times.append((time.perf_counter() - t) * 1000.0 / batch)
    return statistics.median(times)


def ladders(rows: list[dict[str, Any]], path_ms: float) -> list[dict[str, Any]]:
    """Every (cheapest, dearest) pair meeting both shape rules, dearest first."""
    out = []
    for top in rows:
        if top["forward_ms"] < 3 * path_ms:
            continue
        for low in rows:
            if low["forward_ms"] <= top["forward_ms"] / 8:
                out.append({"dearest": top["name"], "cheapest": low["name"],
                            "spread": round(top["forward_ms"] / low["forward_ms"], 1),
                            "dearest_train_ms_per_image": top["train_ms_per_image"]})
    return sorted(out, key=lambda r: (r["dearest_train_ms_per_image"], -r["spread"]))


def variant_rows(name: str, models_dir: Path, repeats: int) -> list[dict[str, Any]]:
    """A trained built-in family's variants as a replica runs them (`run`, one thread, batch 1, a
    decoded held-out item; variants interleaved so drift hits all alike), with their held-out
    accuracy on "digits" from the training's metadata."""
    import torch

    from deployments.models.registry import load_model, read_metadata

    torch.set_num_threads(1)
    model = load_model(name, cache_dir=models_dir)
    meta = read_metadata(name, models_dir) or {}
    accuracy = meta.get("test_accuracy", {}).get("digits", {})
    items = [model.decode(model.examples("val", "digits", limit=1)[0].inputs, "digits")]
    times: dict[str, list[float]] = {v.name: [] for v in model.variants()}
    with torch.inference_mode():
        for k in range(repeats + 3):
            for variant in model.variants():
                t = time.perf_counter()
                model.run(variant, "digits", items)
                if k >= 3:
                    times[variant.name].append((time.perf_counter() - t) * 1000.0)
    return [{"name": v.name, "forward_ms": round(statistics.median(times[v.name]), 2),
             "modalities": sorted(v.modalities or ()),
             "accuracy": accuracy.get(v.name)} for v in model.variants()]


def modality_checks(rows: list[dict[str, Any]]) -> list[Check]:
    """Modalities cost differently: the dearest single-modality variant >= 3x the cheapest."""
    singles = [r["forward_ms"] for r in rows if len(r["modalities"]) == 1]
    ratio = round(max(singles) / min(singles), 1)
    return [Check("dearest single-modality variant / cheapest, batch 1", ratio, ">= 3",
                  ratio >= 3)]


def gamma_checks(rows: list[dict[str, Any]], path_ms: float) -> list[Check]:
    """The token-adaptive ViT's rules (rows ordered by gamma): its gamma moves its cost >= 3x
    (the most-merged setting against the one with the most tokens), and its full-token setting
    costs >= 3x the path, so that under load the model, not the path, runs out."""
    fwd = [r["forward_ms"] for r in rows]
    acc = [r["accuracy"] for r in rows]
    return [
        Check("most tokens / most merged, batch-1 forward", round(fwd[-1] / fwd[0], 2), ">= 3",
              fwd[-1] >= 3 * fwd[0]),
        Check("most tokens' batch-1 forward / the path's CPU per request",
              round(fwd[-1] / path_ms, 2), ">= 3", fwd[-1] >= 3 * path_ms),
        Check("held-out accuracy: most tokens - most merged (points)",
              None if None in acc else round(acc[-1] - acc[0], 4), "> 0",
              None not in acc and acc[-1] > acc[0])]


def rung_checks(rows: list[dict[str, Any]], path_ms: float) -> list[Check]:
    """The shape rules on the trained ladder (rows ordered by cost)."""
    fwd = [r["forward_ms"] for r in rows]
    acc = [r["accuracy"] for r in rows]
    spread = round(acc[-1] - acc[0], 4) if None not in acc else None
    return [
        Check("dearest rung's batch-1 forward / the path's CPU per request",
              round(fwd[-1] / path_ms, 2), ">= 3", fwd[-1] >= 3 * path_ms),
        Check("cheapest rung's batch-1 forward / the dearest's", round(fwd[0] / fwd[-1], 3),
              "<= 0.125", fwd[0] <= fwd[-1] / 8),
        Check("held-out accuracy rises with cost", acc, "increasing",
              None not in acc and all(a < b for a, b in zip(acc, acc[1:], strict=False))),
        Check("accuracy between the ends (points)", spread, ">= 0.10",
              spread is not None and spread >= 0.10)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench family-shapes", description=__doc__)
    parser.add_argument("--path-ms", type=float, default=16.0,
                        help="the serving path's CPU per classify request (docs/front.md)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--train-threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/family_shapes.json"))
    parser.add_argument("--trained", choices=("ladder", "scenefusion", "scenevit"),
                        help="measure a trained built-in family's variants instead of candidates")
    parser.add_argument("--ladder", action="store_true", help="the same as --trained ladder")
    parser.add_argument("--models-dir", type=Path, default=Path(".cache/models"))
    args = parser.parse_args(argv)
    run = Run()
    trained = "ladder" if args.ladder else args.trained
    if trained is not None:
        rows = variant_rows(trained, args.models_dir, args.repeats)
        print(f"{'variant':<30} {'fwd ms (b=1, 1 thr)':>20} {'held-out accuracy':>18}")
        for r in rows:
            print(f"{r['name']:<30} {r['forward_ms']:>20} {r['accuracy']!s:>18}")
        checks = {"ladder": rung_checks, "scenevit": gamma_checks}.get(
            trained, lambda r, _: modality_checks(r))(rows, args.path_ms)
        for c in checks:
            print(f"  {c.name}: {c.value} ({c.target}) {'ok' if c.ok else 'MISSED'}")
        return run.finish(args.out, {"variants": rows}, checks=checks,
                          settings=vars(args) | {"out": str(args.out),
                                                 "models_dir": str(args.models_dir)})
    rows = []
    print(f"{'candidate':<28} {'params M':>8} {'fwd ms (b=1, 1 thr)':>20} {'train ms/img':>13}")
    for arch, px in CANDIDATES:
        model = build(arch, px)
        row = {"name": f"{arch}@{px}", "arch": arch, "px": px,
               "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
               "forward_ms": round(forward_ms(model, px, args.repeats), 2),
               "train_ms_per_image": round(train_ms_per_image(model, px, args.train_threads), 2)}
        rows.append(row)
        print(f"{row['name']:<28} {row['params_m']:>8} {row['forward_ms']:>20} "
              f"{row['train_ms_per_image']:>13}")
    found = ladders(rows, args.path_ms)
    print(f"\nladders meeting the rules (dearest >= {3 * args.path_ms:g} ms, cheapest <= 1/8 of "
          f"it), cheapest to train first:")
    for r in found[:10]:
        print(f"  {r['cheapest']:<26} .. {r['dearest']:<26} {r['spread']:>5}x  "
              f"dearest trains at {r['dearest_train_ms_per_image']} ms/image")
    checks = [Check("ladders meeting the shape rules", len(found), ">= 1", len(found) >= 1)]
    return run.finish(args.out, {"rows": rows, "ladders": found},
                      settings=vars(args) | {"out": str(args.out)}, checks=checks)
