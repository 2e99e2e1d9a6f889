"""Six max-size jobs at once beside other families' single requests: do the others keep their
SLO (table + a Result + PNG; docs/huge_jobs.md).

    RAY_AUTH_MODE=disabled .venv/bin/python -m bench huge-jobs [--docs]

On a private local Ray Serve (HTTP port --port): single /v1/classify requests (Poisson,
--single-qps each) to every family of --single-families for the whole run; a quiet phase, then
one phase per job kind (--kinds: blank, noisy 1024x1024 PNGs) and job SLO (--job-slos-ms) in
which --clients clients each send a job of the largest allowed size to --job-family back to
back for --huge-s (and one job over the item cap: 413). Reports each family's attainment quiet
vs while the jobs were in flight (target: other families lose <= 5 points), the jobs' outcomes,
and how long the job family's classifier kept working after the last job was answered. The
run is bench/experiments/huge_jobs/run.py; the figures bench/experiments/huge_jobs/report.py
(its checks, one per phase and family, and the over-cap job's 413).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.core.cli import experiment_parser, log_progress
from bench.experiments.huge_jobs.run import HugeJobsSettings


def parse(argv: list[str] | None = None) -> tuple[HugeJobsSettings, Path, Path]:
    p = experiment_parser(__doc__, out="results/huge_jobs/huge_jobs.json", seed=0, port=8130,
                          config="serve_config.yaml")
    p.add_argument("--job-family", default="family", help="the family the jobs go to")
    p.add_argument("--single-families", nargs="+", default=["vit", "fusion", "family"])
    p.add_argument("--single-qps", type=float, default=10.0, help="per family, requests/s")
    p.add_argument("--kinds", nargs="+", default=["blank", "noisy"], choices=["blank", "noisy"])
    p.add_argument("--job-slos-ms", type=float, nargs="+", default=[200.0, 5000.0])
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--warmup-s", type=float, default=5.0)
    p.add_argument("--quiet-s", type=float, default=20.0)
    p.add_argument("--huge-s", type=float, default=15.0, help="each job phase's sending time")
    p.add_argument("--after-s", type=float, default=6.0)
    p.add_argument("--no-retry-after", dest="honour_retry_after", action="store_false",
                   help="job clients resend at once after a 429/503")
    p.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs")
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--records", type=Path, default=Path("results/huge_jobs/records.json"))
    p.add_argument("--png", type=Path, default=Path("results/huge_jobs/huge_jobs.png"))
    p.add_argument("--docs", action="store_true",
                   help="write docs/data_huge_jobs.json and docs/figures/huge_jobs.png instead")
    a = vars(p.parse_args(argv))
    out, png, docs = a.pop("out"), a.pop("png"), a.pop("docs")
    if docs:
        out, png = Path("docs/data_huge_jobs.json"), Path("docs/figures/huge_jobs.png")
    tuples = {k: tuple(a[k]) for k in ("single_families", "kinds", "job_slos_ms")}
    command = " ".join(["python -m bench huge-jobs", *(sys.argv[1:] if argv is None else argv)])
    return HugeJobsSettings(**{**a, **tuples}, command=command), out, png


def main(argv: list[str] | None = None) -> int:
    settings, out_path, png = parse(argv)
    log_progress()
    from bench.core.cli import settings_of
    from bench.core.result import Run, checks_from_flags
    from bench.core.run_report import clean
    from bench.experiments.huge_jobs.report import figures, plot, table
    from bench.experiments.huge_jobs.run import run_huge_jobs, split_records

    run = Run()
    out = run_huge_jobs(settings)
    fig = figures(out)
    slim = {**split_records(out, settings.records), **fig}
    print(f"commit {slim['commit']} (modified: {', '.join(slim['modified']) or '-'}); "
          f"limits {slim['limits']}; job bodies {slim['job_body_bytes']} bytes; "
          f"run {slim['wall_s']:.0f} s, loadavg {slim['loadavg_1min_after_run']:.1f}")
    print(table(fig))
    checks = checks_from_flags(fig["checks"])
    code = run.finish(out_path, clean(slim), checks=checks, also=(png, settings.records),
                      settings={**settings_of(settings), "out": str(out_path), "png": str(png)})
    plot(fig, f"six huge jobs at once to {settings.job_family} ({slim['commit']})", png)
    return code
