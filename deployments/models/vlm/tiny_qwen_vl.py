"""A tiny random-init Qwen2-VL / Qwen2.5-VL model directory built locally from the real
configuration classes, laid out as a user's download is (config.json, model.safetensors,
tokenizer.json + tokenizer_config.json with Qwen's chat template, preprocessor_config.json with
small min/max pixels): what the adapter tests serve through both engines and the app, and what
`python -m bench adapter-startup` times beside `vllm serve`.

The tokenizer is a word-level one over a few words plus Qwen's special tokens (ids 0..7); the
config's image/vision token ids are set to them. The image processor's pixel bounds keep an
image between 2x2 and 8x8 merged patches (4..64 image tokens)."""

from __future__ import annotations

from pathlib import Path

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
            "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<unk>")
WORDS = ("system", "user", "assistant", "you", "are", "a", "helpful", "which", "digit", "is",
         "this", "what", "two", "plus", "three", "?", ".", "\n")
VOCAB_SIZE = 64
PATCH, MERGE = 14, 2
MIN_PIXELS, MAX_PIXELS = (PATCH * MERGE) ** 2 * 4, (PATCH * MERGE) ** 2 * 64

# Qwen2-VL's template (its images rendered the same way), simplified to what the app sends.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tokenizer(specials: tuple[str, ...] = SPECIALS, template: str = CHAT_TEMPLATE,
                    eos: str = "<|im_end|>") -> object:
    """A word-level tokenizer over WORDS (and their capitalised forms) after `specials` (ids
    0..len-1; the first is the pad token)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(specials)}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
        vocab.setdefault(w.capitalize(), len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s+|[?.]"), "isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(specials))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=specials[0],
                                   unk_token="<unk>", chat_template=template,
                                   model_max_length=4096)


def _config(model_type: str) -> object:
    from transformers import Qwen2_5_VLConfig, Qwen2VLConfig

    ids = {"image_token_id": SPECIALS.index("<|image_pad|>"),
           "video_token_id": SPECIALS.index("<|video_pad|>"),
           "vision_start_token_id": SPECIALS.index("<|vision_start|>"),
           "vision_end_token_id": SPECIALS.index("<|vision_end|>")}
    text = {"vocab_size": VOCAB_SIZE, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 2048, "bos_token_id": 0, "eos_token_id": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "mrope_section": [4, 6, 6]}}
    vision = {"depth": 2, "num_heads": 2, "in_channels": 3, "patch_size": PATCH,
              "spatial_merge_size": MERGE, "temporal_patch_size": 2}
    if model_type == "qwen2_vl":
        vision |= {"embed_dim": 32, "mlp_ratio": 2, "hidden_size": 64}
        return Qwen2VLConfig(text_config=text, vision_config=vision, **ids)
    if model_type == "qwen2_5_vl":
        vision |= {"hidden_size": 32, "intermediate_size": 64, "out_hidden_size": 64,
                   "window_size": 112, "fullatt_block_indexes": [1]}
        return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **ids)
    raise ValueError(f"no tiny Qwen-VL of model_type {model_type!r}; valid: qwen2_vl, "
                     "qwen2_5_vl")


def build_tiny_qwen_vl(out: Path, model_type: str = "qwen2_vl", seed: int = 0) -> Path:
    """The model directory at `out` (created), random weights from `seed`."""
    import torch
    from transformers import (
        Qwen2_5_VLForConditionalGeneration,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
    )

    cfg = _config(model_type)
    cls = (Qwen2VLForConditionalGeneration if model_type == "qwen2_vl"
           else Qwen2_5_VLForConditionalGeneration)
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    build_tokenizer().save_pretrained(out)  # type: ignore[attr-defined]
    Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                          patch_size=PATCH, merge_size=MERGE).save_pretrained(out)
    return out
