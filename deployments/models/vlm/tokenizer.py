"""The VLM's tokenizer: a byte-level BPE trained with `tokenizers` on the task vocabulary, so
every task word is one token and any other text still tokenizes (as bytes), saved as a
`PreTrainedTokenizerFast` with a chat template that renders image parts as `<image>`."""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, IMAGE = "<pad>", "<bos>", "<eos>", "<image>"
SPECIAL_TOKENS = (PAD, BOS, EOS, IMAGE)
"""Ids 0..3 in this order."""

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                "seventeen", "eighteen", "nineteen", "twenty")
TASK_WORDS = ("user", "assistant", "image", "which", "digit", "is", "this", "read", "the", "digits",
              "what", "plus", "minus")
VOCAB_SIZE = 512

# One line per turn: "<role>:" then the parts in order: a text part after a space, the k-th
# image part as "<image> image <k in words>" (images are numbered, as Qwen2-VL's template numbers
# "Picture k:", so that a 2-layer decoder learns to read up to 8 images in order within minutes;
# the number follows the image, so it can gather that image's content and the answer's k-th
# word finds it by the number alone); an assistant turn is closed by eos; the generation prompt
# is "assistant:". Content may also be a plain string (vLLM's "string" content format).
CHAT_TEMPLATE = (
    "{%- set words = " + repr(list(NUMBER_WORDS)) + " -%}"
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- set ns = namespace(k=0) -%}"
    "{{ message['role'] }}:"
    "{%- if message['content'] is string %}{{ ' ' + message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' %}{{ ' ' + part['text'] }}"
    "{%- else %}{% set ns.k = ns.k + 1 %}{{ '<image> image ' + words[ns.k] }}"
    "{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}assistant:{% endif -%}"
)


def number_word(n: int) -> str:
    """English word of 0 <= n <= 20."""
    if not 0 <= n < len(NUMBER_WORDS):
        raise ValueError(f"no word for {n}; words cover 0..{len(NUMBER_WORDS) - 1}")
    return NUMBER_WORDS[n]


def _corpus() -> list[str]:
    words = NUMBER_WORDS + TASK_WORDS
    lines = [" ".join(words), "?", ":", "\n"]
    # each word after a space and at a line start, often enough to be merged into one token
    return lines * 4 + [f" {w}" for w in words] * 8 + list(words) * 8


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Deterministic byte-level BPE over the task words plus the special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS,
                                   pad_token=PAD, extra_special_tokens={"image_token": IMAGE},
                                   chat_template=CHAT_TEMPLATE, model_max_length=4096)
    return fast
