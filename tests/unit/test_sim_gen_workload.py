"""The generation simulator's workloads: the generator's statistics against ModServe's published
ones (seed 001 §3.2: tail indices 2.9 / 4.4, 0-16 images with a heavy tail, image bursts
independent of text traffic, image-text prompt token rate up to 5x text-only), determinism, and
the Azure LMM 2025 loader on small files in that schema written here."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import numpy as np
import pytest

from app.sim.generation.requests import GenRequest
from app.sim.generation.traces import load_azure_lmm, load_azure_lmm_arrays, parse_timestamp
from app.sim.generation.workload import (
    IMAGE_TEXT_PROMPT,
    TEXT_ONLY_PROMPT,
    ImageBurst,
    PowerLawTokens,
    TraceArrays,
    burst_rate_for_ratio,
    generate,
    generate_arrays,
    one_day_image_burst,
    steady,
)
from app.sim.generation.workload_summary import summarize, summary_stats

TPI = 1601  # the tokens per image the one-day trace is calibrated with (its default)


def hill(values: np.ndarray, threshold: float) -> float:
    tail = values[values > threshold].astype(float)
    return float(tail.size / np.log(tail / threshold).sum())


def ccdf_slope(values: np.ndarray, lo_q: float, hi_q: float) -> float:
    """Least-squares slope of log P(X > x) against log x between two quantiles."""
    xs = np.quantile(values, np.linspace(lo_q, hi_q, 40))
    survival = np.array([(values > x).mean() for x in xs])
    return float(np.polyfit(np.log(xs), np.log(survival), 1)[0])


@pytest.fixture(scope="module")
def large() -> TraceArrays:
    return generate_arrays(steady(100.0, 0.5, 10_000.0), seed=3)  # about 1e6 requests


@pytest.fixture(scope="module")
def day() -> TraceArrays:
    return generate_arrays(one_day_image_burst(5.0), seed=11)


def per_bin(trace: TraceArrays, weights: np.ndarray, mask: np.ndarray, bin_s: float) -> np.ndarray:
    bins = int(np.ceil(trace.duration_s / bin_s))
    index = (trace.arrival_s[mask] // bin_s).astype(int)
    return np.bincount(index, weights=weights[mask], minlength=bins)[:bins]


def test_prompt_tails_have_the_papers_indices(large: TraceArrays) -> None:
    text_only = large.text_tokens[large.num_images == 0]
    image_text = large.text_tokens[large.num_images > 0]
    assert 900_000 < len(large) < 1_100_000
    assert abs(np.median(text_only) - TEXT_ONLY_PROMPT.median_tokens) <= 5
    assert abs(np.median(image_text) - IMAGE_TEXT_PROMPT.median_tokens) <= 3
    assert hill(text_only, TEXT_ONLY_PROMPT.median_tokens) == pytest.approx(2.9, rel=0.03)
    assert hill(image_text, IMAGE_TEXT_PROMPT.median_tokens) == pytest.approx(4.4, rel=0.03)
    assert ccdf_slope(text_only, 0.55, 0.999) == pytest.approx(-2.9, abs=0.2)
    assert ccdf_slope(image_text, 0.55, 0.999) == pytest.approx(-4.4, abs=0.3)
    # §3.2: image-text prompts have the shorter tail.
    assert (text_only > 8 * 1000).mean() > 10 * (image_text > 8 * 400).mean()
    assert text_only.min() >= TEXT_ONLY_PROMPT.min_tokens
    assert text_only.max() <= TEXT_ONLY_PROMPT.max_tokens


def test_images_per_request_are_0_to_16_with_a_heavy_tail(large: TraceArrays) -> None:
    images = large.num_images
    assert images.min() == 0 and images.max() == 16
    assert 0.48 < (images > 0).mean() < 0.52
    counts = np.bincount(images[images > 0], minlength=17)[1:]
    slope = np.polyfit(np.log(np.arange(1, 17)), np.log(counts), 1)[0]
    assert slope == pytest.approx(-2.0, abs=0.1)
    image_text = images[images > 0]
    # A geometric law with the same mean (2.13) has P(n >= 8) = 0.012; n^-2 has 0.046.
    assert (image_text >= 8).mean() > 0.04
    assert image_text.mean() == pytest.approx(2.13, abs=0.03)


def test_text_traffic_is_the_same_with_or_without_the_image_burst() -> None:
    spec = one_day_image_burst(2.0)
    with_burst = generate_arrays(spec, seed=5)
    without = generate_arrays(dataclasses.replace(spec, bursts=()), seed=5)
    text_a, text_b = with_burst.num_images == 0, without.num_images == 0
    assert np.array_equal(with_burst.arrival_s[text_a], without.arrival_s[text_b])
    assert np.array_equal(with_burst.text_tokens[text_a], without.text_tokens[text_b])
    assert with_burst.num_images.sum() > 1.3 * without.num_images.sum()


def test_the_burst_lifts_images_not_text(day: TraceArrays) -> None:
    spec = one_day_image_burst(5.0)
    burst = spec.bursts[0]
    bin_s = 600.0
    starts = np.arange(0.0, spec.duration_s, bin_s)
    plateau = ((starts >= burst.start_s + burst.ramp_s)
               & (starts + bin_s <= burst.end_s - burst.ramp_s))
    text_mask = day.num_images == 0
    text_rate = per_bin(day, np.ones(len(day)), text_mask, bin_s) / bin_s
    expected = spec.text_only.rate_rps(starts + bin_s / 2)
    assert np.abs(text_rate[plateau] / expected[plateau] - 1).max() < 0.06
    image_rate = per_bin(day, day.num_images.astype(float), ~text_mask, bin_s) / bin_s
    steady_images = spec.image_text.rate_rps(starts + bin_s / 2) * 2.1338
    assert (image_rate[plateau] / steady_images[plateau]).min() > 4.0
    # Independent noise: the text-only residuals do not follow the image-text counts.
    minute_starts = np.arange(0.0, spec.duration_s, 60.0)
    text_counts = per_bin(day, np.ones(len(day)), text_mask, 60.0)
    residual = text_counts - spec.text_only.rate_rps(minute_starts + 30.0) * 60.0
    image_counts = per_bin(day, np.ones(len(day)), ~text_mask, 60.0)
    assert abs(np.corrcoef(residual, image_counts)[0, 1]) < 0.1


def test_image_prompt_rate_reaches_5x_text_only_in_the_burst_only(day: TraceArrays) -> None:
    spec = one_day_image_burst(5.0)
    burst = spec.bursts[0]
    bin_s = 600.0
    starts = np.arange(0.0, spec.duration_s, bin_s)
    text_mask = day.num_images == 0
    text_tps = per_bin(day, day.text_tokens.astype(float), text_mask, bin_s)
    image_tokens = day.text_tokens + day.num_images * TPI
    image_tps = per_bin(day, image_tokens.astype(float), ~text_mask, bin_s)
    ratio = image_tps / text_tps
    in_burst = (starts >= burst.start_s) & (starts + bin_s <= burst.end_s)
    plateau = ((starts >= burst.start_s + burst.ramp_s)
               & (starts + bin_s <= burst.end_s - burst.ramp_s))
    assert ratio.max() == pytest.approx(5.0, rel=0.1)
    assert in_burst[np.argmax(ratio)]
    assert ratio[plateau].min() > 3.5
    assert ratio[~in_burst].max() < 2.5
    stats = summary_stats(day, tokens_per_image=TPI)
    assert stats["prompt_ratio_10min_peak"] == pytest.approx(ratio.max(), rel=1e-9)


def test_same_seed_same_trace_and_generate_matches_the_arrays() -> None:
    spec = one_day_image_burst(0.2)
    a, b, c = generate_arrays(spec, 7), generate_arrays(spec, 7), generate_arrays(spec, 8)
    for column in ("arrival_s", "text_tokens", "num_images", "output_tokens"):
        assert np.array_equal(getattr(a, column), getattr(b, column))
    assert not np.array_equal(a.text_tokens[:1000], c.text_tokens[:1000])
    requests = generate(spec, 7)
    assert all(isinstance(r, GenRequest) for r in requests[:10])
    assert [r.num_images for r in requests] == a.num_images.tolist()
    assert all(x.arrival_s <= y.arrival_s for x, y in zip(requests, requests[1:], strict=False))
    assert all(r.arrival_s < spec.duration_s for r in requests)


def test_one_day_trace_scales_with_the_rate() -> None:
    small, big = one_day_image_burst(1.0), one_day_image_burst(64.0)
    assert big.bursts[0].extra_rps == pytest.approx(64 * small.bursts[0].extra_rps)
    assert big.text_only.mean_rps == pytest.approx(64 * small.text_only.mean_rps)
    hour = [dataclasses.replace(spec, duration_s=3600.0) for spec in (small, big)]
    n_small, n_big = (len(generate_arrays(spec, 1)) for spec in hour)
    assert n_big == pytest.approx(64 * n_small, rel=0.06)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        PowerLawTokens(alpha=1.0, median_tokens=10, min_tokens=1, max_tokens=100)
    with pytest.raises(ValueError, match="ramp"):
        ImageBurst(0.0, 100.0, 1.0, ramp_s=60.0)
    with pytest.raises(ValueError, match="already reach"):
        burst_rate_for_ratio(steady(1.0, 0.9, 100.0), ImageBurst(0.0, 100.0, 0.0, 10.0), 1.0, TPI)


def test_summary_counts_per_minute_and_tokens_per_second() -> None:
    requests = [GenRequest(10.0, 100, 0, 5), GenRequest(70.0, 50, 2, 5),
                GenRequest(80.0, 0, 16, 5), GenRequest(119.0, 30, 0, 5)]
    s = summarize(TraceArrays.from_requests(requests, 180.0), tokens_per_image=10, bin_s=60.0)
    assert s.text_only_rpm.tolist() == [1.0, 1.0, 0.0]
    assert s.image_text_rpm.tolist() == [0.0, 2.0, 0.0]
    assert s.images_per_min.tolist() == [0.0, 18.0, 0.0]
    assert s.text_only_prompt_tps.tolist() == pytest.approx([100 / 60, 30 / 60, 0.0])
    assert s.image_text_prompt_tps.tolist() == pytest.approx([0.0, (50 + 20 + 160) / 60, 0.0])


HEADER = "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n"
ROWS = ("2024-10-15T12:00:05.819Z,1,949,126\n"
        "2024-10-15T12:00:00.269Z,0,770,491\n"
        "2024-10-15 12:00:07.3320000,16,4564,0\n"
        "2024-10-15T12:00:06.513Z,2,300,79\n")


def write(path: Path, text: str) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def test_loader_sorts_splits_tokens_and_reads_gzip(tmp_path: Path) -> None:
    plain = load_azure_lmm(write(tmp_path / "t.csv", HEADER + ROWS), tokens_per_image=256)
    assert [r.arrival_s for r in plain] == pytest.approx([0.0, 5.55, 6.244, 7.063])
    assert [r.num_images for r in plain] == [0, 1, 2, 16]
    assert [r.text_tokens for r in plain] == [770, 949 - 256, 0, 4564 - 16 * 256]
    assert [r.output_tokens for r in plain] == [491, 126, 79, 1]
    zipped = load_azure_lmm(write(tmp_path / "t.csv.gz", HEADER + ROWS), tokens_per_image=256)
    assert zipped == plain
    whole = load_azure_lmm(tmp_path / "t.csv", tokens_per_image=0)
    assert [r.text_tokens for r in whole] == [770, 949, 300, 4564]


def test_loader_window_and_rate_scale(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", HEADER + ROWS)
    window = load_azure_lmm_arrays(path, tokens_per_image=0, start_s=5.0, end_s=7.0,
                                   rate_scale=2.0)
    assert window.arrival_s.tolist() == pytest.approx([0.275, 0.622])
    assert window.num_images.tolist() == [1, 2]
    assert window.duration_s == pytest.approx(1.0)


def test_loader_names_the_bad_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.csv.gz", HEADER + ROWS + "2024-10-15T12:00:09Z,two,100,5\n")
    with pytest.raises(ValueError, match=r"bad\.csv\.gz: line 6: NumImages is not an integer"):
        load_azure_lmm(bad, tokens_per_image=0)
    stamp = write(tmp_path / "stamp.csv", HEADER + "yesterday,0,10,5\n")
    with pytest.raises(ValueError, match="line 2: not a number of seconds or an ISO-8601 time"):
        load_azure_lmm(stamp, tokens_per_image=0)
    first_row = ROWS.splitlines(keepends=True)[0]
    negative = write(tmp_path / "neg.csv", HEADER + first_row + "12.5,0,-3,5\n")
    with pytest.raises(ValueError, match="line 3: ContextTokens is negative"):
        load_azure_lmm(negative, tokens_per_image=0)
    short = write(tmp_path / "short.csv", HEADER + "12.5,0,3\n")
    with pytest.raises(ValueError, match="line 2: 3 fields"):
        load_azure_lmm(short, tokens_per_image=0)
    header = write(tmp_path / "header.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n")
    with pytest.raises(ValueError, match="lacks columns \\['NumImages'\\]"):
        load_azure_lmm(header, tokens_per_image=0)


def test_timestamps_in_seconds_or_date_times() -> None:
    assert parse_timestamp(" 12.25 ") == 12.25
    base = parse_timestamp("2024-10-15T12:00:00Z")
    assert parse_timestamp("2024-10-15T12:00:05.819Z") - base == pytest.approx(5.819)
    assert parse_timestamp("2024-10-15 12:00:00.5000000") - base == pytest.approx(0.5)
    assert parse_timestamp("2024-10-15T14:00:00+02:00") == base
    with pytest.raises(ValueError, match="finite"):
        parse_timestamp("nan")
