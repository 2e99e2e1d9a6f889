"""`python -m bench <experiment> [flags]`: every experiment of the project, one entry point.

    python -m bench --help                       the experiments, one line each
    python -m bench <experiment> --help          its flags
    python -m bench --repeats 3 <experiment> ... run it 3 times (Results out.r1.json ...) and
                                                 write out.json: each check's median and range
    python -m bench --repeats 3 --keep-repeats <experiment> ...
                                                 the same, keeping each out.rN.json that the same
                                                 command already wrote (an interrupted series)

Each experiment writes one `Result` (bench/core/result.py) to its `--out`.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.core.result import Check, Run, read_result

# name -> (module with main(argv) -> int | None, what it measures)
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "adaptive-vs-static": ("bench.experiments.adaptive_vs_static.cli",
                           "the knobs (RAMSIS, OTAS, MOSEL) against static configurations, live, "
                           "with the simulator's prediction"),
    "single-request": ("bench.experiments.single_request.cli",
                       "single requests at 1x/2x/3x capacity, beside a FastAPI+torch floor"),
    "reliability": ("bench.experiments.reliability.cli",
                    "malformed and hostile clients, kills and soak under load"),
    "node-loss": ("bench.experiments.node_loss.cli", "a worker node stopped under load"),
    "huge-jobs": ("bench.experiments.huge_jobs.cli",
                  "six max-size jobs at once beside other families' single requests"),
    "generation-systems": ("bench.experiments.generation_systems.cli",
                           "the chat path's modes beside plain vllm serve and Ray Serve LLM"),
    "autoscaling-burst": ("bench.experiments.autoscaling.burst_cli",
                          "an image burst scales the encoders up and down, live"),
    "autoscaling-decision": ("bench.experiments.autoscaling.decision",
                             "how long one autoscaling decision takes"),
    "replica-startup": ("bench.experiments.autoscaling.replica_startup",
                        "time from a scale-up decision to a serving replica"),
    "fidelity": ("bench.experiments.fidelity.cli",
                 "the simulator against live runs, both paths (knobs, single-request, "
                 "adaptive-vs-static, generation)"),
    "ramsis": ("bench.experiments.papers.ramsis_sim",
               "RAMSIS in the simulator: one scenario, the paper's figures, or its fidelity"),
    "ramsis-costs": ("bench.experiments.papers.ramsis_cli",
                     "RAMSIS policy generation, lookup and simulator costs"),
    "mosel": ("bench.experiments.papers.mosel_cli", "MOSEL's policies on the Twitter-shaped load"),
    "otas": ("bench.experiments.papers.otas_cli", "OTAS against every fixed gamma"),
    "modserve": ("bench.experiments.papers.modserve",
                 "ModServe's static-allocation figures in the simulator"),
    "modserve-day": ("bench.experiments.papers.modserve_day",
                     "ModServe's autoscaled day in the simulator"),
    "modserve-monolith-at-slo": ("bench.experiments.papers.monolith_at_slo",
                                 "whether and at what cost the monolith meets the day's SLO"),
    "modserve-zero-load": ("bench.experiments.papers.zero_load_floor",
                           "each system's TTFT on the figure's requests served alone"),
    "chat-workload-plot": ("bench.experiments.papers.chat_workload_plot",
                           "the simulator's one-day image-burst workload, plotted"),
    "coload": ("bench.experiments.coload.cli", "how much busy neighbours slow a model"),
    "adapter-startup": ("bench.experiments.own_models.adapter_startup",
                        "each architecture adapter's start time and idle TTFT beside vllm serve"),
    "family-shapes": ("bench.experiments.families.shapes",
                      "what candidate classify architectures cost beside the serving path"),
    "vlm-card": ("bench.experiments.vlm.card", "the VLM's held-out accuracy and stage costs"),
    "vlm-vllm-check": ("bench.experiments.vlm.vllm_check",
                       "vLLM loads the VLM's directory and answers like transformers"),
    "fuzz": ("bench.experiments.fuzz.cli", "schemathesis against a running server"),
    "loadgen": ("bench.experiments.loadgen",
                "open-loop replay of a trace against a running server's /v1/classify"),
}


def _parser() -> argparse.ArgumentParser:
    width = max(len(n) for n in EXPERIMENTS)
    listing = "\n".join(f"  {n:<{width}}  {text}" for n, (_, text) in EXPERIMENTS.items())
    parser = argparse.ArgumentParser(
        prog="python -m bench", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__, epilog="experiments:\n" + listing)
    parser.add_argument("--repeats", type=int, default=1,
                        help="run the experiment this many times and summarise its checks")
    parser.add_argument("--keep-repeats", action="store_true",
                        help="with --repeats: keep a repeat's Result that the same command "
                             "already wrote instead of running it again")
    parser.add_argument("experiment", choices=sorted(EXPERIMENTS), metavar="experiment")
    return parser


def run_experiment(name: str, argv: list[str]) -> int:
    if name not in EXPERIMENTS:
        raise SystemExit(f"unknown experiment {name!r}; experiments: {', '.join(EXPERIMENTS)}")
    module = importlib.import_module(EXPERIMENTS[name][0])
    code = module.main(argv)
    return int(code or 0)


def _out_of(argv: list[str]) -> tuple[Path | None, int]:
    for i, arg in enumerate(argv):
        if arg == "--out" and i + 1 < len(argv):
            return Path(argv[i + 1]), i + 1
        if arg.startswith("--out="):
            return Path(arg.split("=", 1)[1]), i
    return None, -1


def summarise(results: list[dict[str, Any]]) -> list[Check]:
    """Each check over the repeats: median value (numbers), range, met in how many."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        for c in r["checks"]:
            by_name.setdefault(c["name"], []).append(c)
    out = []
    for name, cs in by_name.items():
        values = [c["value"] for c in cs]
        met = sum(c["ok"] is True for c in cs)
        judged = sum(c["ok"] is not None for c in cs)
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            value: Any = {"median": statistics.median(values), "min": min(values),
                          "max": max(values), "values": values}
        else:
            value = {"values": values}
        out.append(Check(name, value, cs[0]["target"],
                         None if judged == 0 else met * 2 > judged))
    return out


def kept_repeat(path: Path, name: str, argv: list[str]) -> bool:
    """`path` holds a Result written as a repeat of this very command (`--repeats N name
    argv`, whatever N): the same experiment and flags, so it may stand for that repeat."""
    if not path.is_file():
        return False
    try:
        command = str(read_result(path)["header"]["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return "--repeats" in command and command.endswith(" ".join([name, *argv]))


def repeat(name: str, argv: list[str], repeats: int, keep: bool = False) -> int:
    out, at = _out_of(argv)
    if out is None:
        raise SystemExit("--repeats needs the experiment's --out PATH (each repeat writes beside it)")
    run, codes, paths, kept = Run(), [], [], []
    for i in range(1, repeats + 1):
        path = out.with_suffix(f".r{i}{out.suffix}")
        args = list(argv)
        args[at] = f"--out={path}" if args[at].startswith("--out=") else str(path)
        if keep and kept_repeat(path, name, argv):
            print(f"repeat {i}: kept {path} (written by this command before)")
            codes.append(0)
            kept.append(str(path))
        else:
            codes.append(run_experiment(name, args))
        paths.append(str(path))
    results = [read_result(Path(p)) for p in paths]
    checks = summarise(results)
    run.write(out, {"repeats": paths, "exit_codes": codes, "kept": kept},
              settings={"experiment": name, "argv": argv, "repeats": repeats}, checks=checks)
    for c in checks:
        print(f"{c.name}: {c.value.get('median', c.value['values'])} (target {c.target}, "
              f"met {'yes' if c.ok else 'no' if c.ok is False else '-'})")
    print(f"wrote {out}")
    return 0 if all(code == 0 for code in codes) else 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    # everything after the experiment's name is the experiment's own
    split = next((i for i, a in enumerate(argv) if a in EXPERIMENTS), len(argv))
    args = parser.parse_args(argv[:split + 1])
    rest = argv[split + 1:]
    if args.repeats > 1:
        return repeat(args.experiment, rest, args.repeats, args.keep_repeats)
    return run_experiment(args.experiment, rest)


if __name__ == "__main__":
    sys.exit(main())
