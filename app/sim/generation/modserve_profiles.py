"""Stage profiles shaped like ModServe's two models on A100s (seed 001 §3.1, Table 1, §5), built
from published numbers with a roofline and stated efficiencies; every source is in
docs/sim_generation.md ("Profiles").

Latency of work W (FLOPs) moving B bytes on a replica of `tp` A100s:
    max(W / (peak x mfu) x tp_scale(tp, serial), B / (tp x hbm x mbu)) + step overhead
with tp_scale(tp, c) = (1/tp + c) / (1 + c), an Amdahl-style tensor-parallel scaling whose
serial share c is read from the paper for the vision encoders (§3.1: a 6B InternViT gets 1.3x
from TP-4 to TP-8, so c = 0.29) and assumed small for the LLMs (0.05).

- Encoder batch of b images: b x tiles x (2 x params x tokens_in + 4 x tokens_in^2 x hidden x
  layers) FLOPs, compute-bound (Fig. 6: linear in the batch, no gain from batching).
- Prefill of n prompt tokens: 2 x params x n FLOPs, at least one read of the weights (the
  attention's quadratic term is left out: ~11% of the FLOPs at 8k tokens).
- Decode step of b sequences: the weights plus b sequences' KV cache (`decode_context_tokens`
  each, plus the cross-attention KV of one image for a cross-attention model) read once, or
  2 x params x b FLOPs if more.

An image of the dataset (ShareGPT-4o, median width and height ~500 px, §3.2) is one 560 px tile
for Llama3.2-11B (1601 tokens, §3.2, Fig. 12's setup) and five 448 px tiles for InternVL2.5-26B
(5 x 256 = 1280 tokens, Table 1's example image; `internvl_tiles`: InternVL's dynamic tiling
picks the grid closest to the image's aspect ratio, so only a square image up to 633 px is one
tile, a 4:3 photo of any size is 13; docs/sim_generation.md says why 5). The encoder MFU of
Llama3.2-11B and the prefill MFU of InternVL2.5-26B are calibrated on that same image so that
image encoding is 79% and 25% of an isolated one-image TTFT at Table 1's TP degrees (Fig. 5),
with a short prompt of `FIG5_TEXT_TOKENS` text tokens (assumed: ShareGPT-4o's questions are
short); `model(name, tiles)` calibrates again for another tile count.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.generation.stage_profile import EncoderProfile, LLMProfile, StageProfiles
from policies.generation.token_routing import Architecture

FIG5_TEXT_TOKENS = 100
ENCODER_BATCHES = (1, 2, 4, 8, 16, 32)
PREFILL_TOKENS = (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Accelerator:
    name: str
    peak_flops: float  # dense BF16 tensor-core FLOP/s
    hbm_bytes_per_s: float


A100 = Accelerator("A100-SXM4-80GB", 312e12, 2039e9)  # NVIDIA A100 datasheet


@dataclass(frozen=True)
class VisionSpec:
    name: str
    params: float
    tokens_in_per_tile: int  # the ViT's sequence per tile (patches + CLS)
    tokens_out_per_tile: int  # image tokens the LLM receives per tile
    hidden: int
    layers: int


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    architecture: Architecture
    params: float
    kv_bytes_per_token: int  # self-attention K and V, BF16, all layers
    image_kv_bytes_per_token: int = 0  # cross-attention K and V per image token (BF16)


@dataclass(frozen=True)
class Efficiency:
    encoder_mfu: float
    prefill_mfu: float
    decode_mbu: float = 0.6  # share of HBM bandwidth a decode step reaches (assumed)
    decode_mfu: float = 0.5  # a decode step's compute bound, at large batches (assumed)
    encoder_tp_serial: float = 0.29  # §3.1: InternViT-6B 1.3x faster at TP-8 than TP-4
    llm_tp_serial: float = 0.05  # assumed
    step_overhead_ms: float = 2.0  # per forward pass: scheduling, sampling, launches (assumed)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    vision: VisionSpec
    language: LanguageSpec
    efficiency: Efficiency
    table1_tp: int  # the model's default TP in ModServe's Table 1 (Fig. 5 was measured at it)
    tiles_per_image: int = 1
    decode_context_tokens: int = 1500  # mean context of a decoding sequence (assumed)

    @property
    def tokens_per_image(self) -> int:
        return self.tiles_per_image * self.vision.tokens_out_per_tile


def tp_scale(tp: int, serial: float) -> float:
    return (1.0 / tp + serial) / (1.0 + serial)


def encoder_ms(spec: ModelSpec, images: float, tp: int, hw: Accelerator = A100) -> float:
    v, eff = spec.vision, spec.efficiency
    seq = v.tokens_in_per_tile
    per_tile = 2.0 * v.params * seq + 4.0 * seq * seq * v.hidden * v.layers
    compute = images * spec.tiles_per_image * per_tile / (hw.peak_flops * eff.encoder_mfu)
    weights = 2.0 * v.params / (tp * hw.hbm_bytes_per_s * eff.decode_mbu)
    return max(compute * tp_scale(tp, eff.encoder_tp_serial), weights) * 1000.0 \
        + eff.step_overhead_ms


def prefill_ms(spec: ModelSpec, tokens: float, tp: int, hw: Accelerator = A100) -> float:
    lang, eff = spec.language, spec.efficiency
    compute = 2.0 * lang.params * tokens / (hw.peak_flops * eff.prefill_mfu)
    weights = 2.0 * lang.params / (tp * hw.hbm_bytes_per_s * eff.decode_mbu)
    return max(compute * tp_scale(tp, eff.llm_tp_serial), weights) * 1000.0 \
        + eff.step_overhead_ms


def decode_ms(spec: ModelSpec, batch: int, tp: int, hw: Accelerator = A100) -> float:
    lang, eff = spec.language, spec.efficiency
    per_seq = spec.decode_context_tokens * lang.kv_bytes_per_token \
        + spec.tokens_per_image * lang.image_kv_bytes_per_token
    memory = (2.0 * lang.params + batch * per_seq) / (tp * hw.hbm_bytes_per_s * eff.decode_mbu)
    compute = 2.0 * lang.params * batch / (hw.peak_flops * eff.decode_mfu) \
        * tp_scale(tp, eff.llm_tp_serial)
    return max(memory, compute) * 1000.0 + eff.step_overhead_ms


def stage_profiles(spec: ModelSpec, encoder_tp: int, llm_tp: int,
                   hw: Accelerator = A100) -> StageProfiles:
    """One encoder replica at `encoder_tp` and one LLM replica at `llm_tp` (for the monolith:
    both the replica's TP)."""
    encoder = EncoderProfile(spec.tokens_per_image,
                             {b: encoder_ms(spec, b, encoder_tp, hw) for b in ENCODER_BATCHES})
    llm = LLMProfile(spec.language.architecture,
                     {n: prefill_ms(spec, n, llm_tp, hw) for n in PREFILL_TOKENS},
                     {b: decode_ms(spec, b, llm_tp, hw) for b in DECODE_BATCHES})
    meta = {"vision": spec.vision.name, "language": spec.language.name,
            "encoder_tp": encoder_tp, "llm_tp": llm_tp, "efficiency": spec.efficiency.__dict__,
            "source": "app/sim/generation/modserve_profiles.py (docs/sim_generation.md)"}
    return StageProfiles(spec.name, f"{hw.name} encoder TP-{encoder_tp}, LLM TP-{llm_tp}",
                         encoder, llm, meta)


def encode_share(spec: ModelSpec, text_tokens: int = FIG5_TEXT_TOKENS,
                 tp: int | None = None) -> float:
    """Image encoding's share of an isolated one-image TTFT (Fig. 5), at Table 1's TP."""
    tp = spec.table1_tp if tp is None else tp
    prompt = text_tokens + (spec.tokens_per_image
                            if spec.language.architecture is Architecture.DECODER_ONLY else 0)
    enc = encoder_ms(spec, 1, tp)
    return enc / (enc + prefill_ms(spec, prompt, tp))


def calibrate(spec: ModelSpec, share: float, knob: str) -> ModelSpec:
    """`spec` with efficiency field `knob` (encoder_mfu or prefill_mfu) set by bisection so that
    encode_share(spec) == share."""
    lo, hi = 1e-3, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        s = encode_share(replace(spec, efficiency=replace(spec.efficiency, **{knob: mid})))
        # a faster encoder raises no share; a faster prefill raises the encoder's share
        if (s > share) == (knob == "encoder_mfu"):
            lo = mid
        else:
            hi = mid
    return replace(spec, efficiency=replace(spec.efficiency, **{knob: round((lo + hi) / 2, 4)}))


LLAMA32_11B = ModelSpec(
    "Llama3.2-11B-Vision",
    VisionSpec("ViT-H/14 (630M)", 630e6, 1601, 1601, 1280, 40),
    LanguageSpec("Llama 3.1 8B + 8 cross-attention layers", Architecture.CROSS_ATTENTION, 9.78e9,
                 32 * 2 * 8 * 128 * 2, 8 * 2 * 8 * 128 * 2),
    Efficiency(encoder_mfu=0.1659, prefill_mfu=0.5), table1_tp=4)

INTERNVL25_26B = ModelSpec(
    "InternVL2.5-26B",
    VisionSpec("InternViT-6B-448px-V2_5 (5.54B)", 5.54e9, 1025, 256, 3200, 45),
    LanguageSpec("InternLM2.5-20B-chat", Architecture.DECODER_ONLY, 19.86e9,
                 48 * 2 * 8 * 128 * 2),
    Efficiency(encoder_mfu=0.5, prefill_mfu=0.0783), table1_tp=8, tiles_per_image=5)

MODELS = {"llama3.2-11b": LLAMA32_11B, "internvl2.5-26b": INTERNVL25_26B}
FIG5_SHARE = {"llama3.2-11b": 0.79, "internvl2.5-26b": 0.25}  # ModServe §3.1, Figure 5
MONOLITH_TP, TEXT_TP, IMAGE_TP = 4, 4, 1  # ModServe §5.2


CALIBRATED = {"llama3.2-11b": "encoder_mfu", "internvl2.5-26b": "prefill_mfu"}  # Fig. 5's knob


def internvl_tiles(width: int, height: int, max_num: int = 12, min_num: int = 1,
                   image_size: int = 448, use_thumbnail: bool = True) -> int:
    """448 px tiles InternVL's dynamic preprocessing makes of a width x height image (OpenGVLab
    InternVL `dynamic_preprocess` / `find_closest_aspect_ratio`, internvl_chat/internvl/train/
    dataset.py; InternVL2.5's model card and config: max_num 12, thumbnail on): the grid of at
    most `max_num` tiles whose aspect ratio is closest to the image's (on a tie, the larger grid
    when the image's area exceeds half the grid's), plus a thumbnail tile if the grid has more
    than one."""
    aspect, area = width / height, width * height
    ratios = sorted({(i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1)
                     for j in range(1, n + 1) if min_num <= i * j <= max_num},
                    key=lambda r: r[0] * r[1])
    best, best_diff = (1, 1), float("inf")
    for i, j in ratios:
        diff = abs(aspect - i / j)
        if diff < best_diff:
            best, best_diff = (i, j), diff
        elif diff == best_diff and area > 0.5 * image_size * image_size * i * j:
            best = (i, j)
    blocks = best[0] * best[1]
    return blocks + (1 if use_thumbnail and blocks != 1 else 0)


def model(name: str, tiles: int | None = None, **efficiency: float) -> ModelSpec:
    """The model's spec, with `efficiency` fields replaced (a sensitivity run) and `tiles` tiles
    per image (None: the spec's); with other tiles, Fig. 5's calibrated efficiency is calibrated
    again on that image (unless `efficiency` sets it)."""
    try:
        spec = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; valid: {sorted(MODELS)}") from None
    if efficiency:
        spec = replace(spec, efficiency=replace(spec.efficiency, **efficiency))
    if tiles is not None and tiles != spec.tiles_per_image:
        if tiles < 1:
            raise ValueError(f"tiles must be >= 1, got {tiles}")
        spec = replace(spec, tiles_per_image=tiles)
        if CALIBRATED[name] not in efficiency:
            spec = calibrate(spec, FIG5_SHARE[name], CALIBRATED[name])
    return spec


def modserve_profiles(name: str, tiles: int | None = None,
                      **efficiency: float) -> tuple[StageProfiles, StageProfiles]:
    """(disaggregated: image instance TP-1 + text instance TP-4, monolith TP-4) of a model
    (`model` says what `tiles` and `efficiency` change)."""
    spec = model(name, tiles, **efficiency)
    return (stage_profiles(spec, IMAGE_TP, TEXT_TP),
            stage_profiles(spec, MONOLITH_TP, MONOLITH_TP))


def shape_checks(name: str, tiles: int | None = None, **efficiency: float) -> dict[str, float]:
    """The profile's numbers to hold against the paper's (docs/sim_generation.md): Fig. 5's
    encode share, Fig. 8's latency growth with the batch (normalized to batch 1, at the
    serving TP), Fig. 9's TP effect, and the isolated one-image stage times."""
    spec = model(name, tiles, **efficiency)
    prompt = FIG5_TEXT_TOKENS + (spec.tokens_per_image if spec.language.architecture
                                 is Architecture.DECODER_ONLY else 0)
    return {
        "encode_share_fig5": encode_share(spec), "encode_share_paper": FIG5_SHARE[name],
        "encoder_batch8_vs_1": encoder_ms(spec, 8, IMAGE_TP) / encoder_ms(spec, 1, IMAGE_TP),
        "prefill_batch8_vs_1": prefill_ms(spec, 8 * prompt, TEXT_TP)
        / prefill_ms(spec, prompt, TEXT_TP),
        "decode_batch64_vs_1": decode_ms(spec, 64, TEXT_TP) / decode_ms(spec, 1, TEXT_TP),
        "encoder_tp8_vs_tp4": encoder_ms(spec, 1, 8) / encoder_ms(spec, 1, 4),
        "encoder_tp1_vs_tp4": encoder_ms(spec, 1, 1) / encoder_ms(spec, 1, 4),
        "encode_ms_tp1": encoder_ms(spec, 1, IMAGE_TP),
        "encode_ms_tp4": encoder_ms(spec, 1, MONOLITH_TP),
        "prefill_ms_tp4": prefill_ms(spec, prompt, TEXT_TP),
        "tbt_ms_batch64_tp4": decode_ms(spec, 64, TEXT_TP),
    }
