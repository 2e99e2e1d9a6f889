"""The LLaVA model from configs: CLIP vision tower + 2-layer MLP projector + Llama decoder, the
pixel preprocessing it was trained with, and the encoder stage (images -> embeddings)."""

from __future__ import annotations

import torch
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    PreTrainedTokenizerFast,
)

from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.tokenizer import IMAGE, NUMBER_WORDS

IMAGE_MEAN = (0.5, 0.5, 0.5)
IMAGE_STD = (0.5, 0.5, 0.5)
FEATURE_LAYER = -1
"""The tower's last layer feeds the projector (so every tower layer runs in every engine)."""


def hf_config(cfg: VlmConfig, tokenizer: PreTrainedTokenizerFast) -> LlavaConfig:
    v, t = cfg.vision, cfg.text
    vision = CLIPVisionConfig(hidden_size=v.hidden_size, intermediate_size=v.intermediate_size,
                              num_hidden_layers=v.num_layers, num_attention_heads=v.num_heads,
                              image_size=v.image_size_px, patch_size=v.patch_size_px,
                              num_channels=3, projection_dim=v.hidden_size)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=t.hidden_size,
                       intermediate_size=t.intermediate_size, num_hidden_layers=t.num_layers,
                       num_attention_heads=t.num_heads, num_key_value_heads=t.num_heads,
                       head_dim=t.head_dim, max_position_embeddings=t.max_model_len,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    return LlavaConfig(vision_config=vision, text_config=text,
                       image_token_id=tokenizer.convert_tokens_to_ids(IMAGE),
                       image_seq_length=v.tokens_per_image, projector_hidden_act="gelu",
                       vision_feature_layer=FEATURE_LAYER,
                       vision_feature_select_strategy="default", tie_word_embeddings=False)


def build_model(cfg: VlmConfig, tokenizer: PreTrainedTokenizerFast,
                ) -> LlavaForConditionalGeneration:
    """A freshly initialised model (seed torch's RNG first for reproducible weights)."""
    model = LlavaForConditionalGeneration(hf_config(cfg, tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


@torch.no_grad()
def init_number_embeddings(model: LlavaForConditionalGeneration,
                           tokenizer: PreTrainedTokenizerFast, scale: float, seed: int) -> None:
    """Put the number words on a number line: the first 32 dimensions of their input
    embeddings become sin/cos of the value at 16 seeded frequencies, times `scale` (0 leaves
    them)."""
    if scale == 0:
        return
    weight = model.get_input_embeddings().weight
    gen = torch.Generator().manual_seed(seed)
    freqs = torch.rand(16, generator=gen) * 0.5 + 0.05
    for value, word in enumerate(NUMBER_WORDS):
        angle = freqs * value
        line = torch.cat([angle.sin(), angle.cos()]) * scale
        for token in (word, " " + word):
            ids = tokenizer(token, add_special_tokens=False).input_ids
            if len(ids) == 1:
                weight[ids[0], :32] = line


def image_processor(cfg: VlmConfig) -> CLIPImageProcessor:
    """The processor saved with the model: an image of the tower's size passes through
    unchanged except for rescale and normalisation (`pixel_values` below); other sizes are
    resized (bicubic) and centre-cropped."""
    size = cfg.vision.image_size_px
    return CLIPImageProcessor(size={"shortest_edge": size},
                              crop_size={"height": size, "width": size},
                              image_mean=list(IMAGE_MEAN), image_std=list(IMAGE_STD),
                              do_convert_rgb=True)


def pixel_values(images: torch.Tensor) -> torch.Tensor:
    """Normalised float [N, 3, H, W] of uint8 grey [N, H, W] (or RGB [N, 3, H, W]) images."""
    x = images.float().div(255.0)
    if x.dim() == 3:
        x = x[:, None].expand(-1, 3, -1, -1)
    mean = torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGE_STD).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous()


def tower_features(model: LlavaForConditionalGeneration, pixels: torch.Tensor) -> torch.Tensor:
    """The tower's selected features [N, tokens, vision hidden] (before the projector)."""
    out = model.model.vision_tower(pixels, output_hidden_states=True, return_dict=True)
    return out.hidden_states[FEATURE_LAYER][:, 1:]


def encode_images(model: LlavaForConditionalGeneration, pixels: torch.Tensor) -> torch.Tensor:
    """The encoder stage: image embeddings [num_images, tokens, text hidden] (tower +
    projector) of normalised pixels [num_images, 3, H, W], as vLLM takes them
    (`multi_modal_data={"image": embeddings}`)."""
    return model.model.multi_modal_projector(tower_features(model, pixels))
