"""Where a classifier family's model comes from (`classifiers[].model`), torch-free config.

- `builtin: vit | fusion | family | ladder | scenefusion | scenevit`: ours, trained by our script
  on first use;
- `checkpoints: [...]`: the user's variants, each a timm architecture with a local weights file,
  a local Hugging Face image-classification directory, or a TorchScript file; input size,
  channels, mean/std and label names read from the checkpoint, overridable here;
- `import_path: "pkg.module:factory"`: the user's own `ServableModel` (its own knobs).

`dataset` names the labelled data a family's accuracy is measured on (an ImageFolder-style tree
or JSONL of wire inputs and labels); checkpoint families need one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

BUILTIN_FAMILIES = ("vit", "fusion", "family", "ladder", "scenefusion", "scenevit")


class StrictConfig(BaseModel):
    """Frozen, unknown keys are errors (as `deployments.config.StrictConfig`, which the models
    layer sits below)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

IMPORT_PATH = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


class BuiltinModel(StrictConfig):
    builtin: Literal["vit", "fusion", "family", "ladder", "scenefusion", "scenevit"] = Field(
        description="one of our families, trained on first use by our script")


class InputSpec(StrictConfig):
    """How an image becomes a checkpoint's input tensor; each field unset is read from the
    checkpoint (timm's pretrained_cfg, preprocessor_config.json)."""

    size: int | None = Field(None, gt=0, le=1024, description="square side the image is resized to")
    channels: Literal[1, 3] | None = Field(None, description="1: greyscale, 3: RGB")
    mean: tuple[float, ...] | None = Field(None, min_length=1, max_length=3)
    std: tuple[float, ...] | None = Field(None, min_length=1, max_length=3)

    @model_validator(mode="after")
    def _positive_std(self) -> InputSpec:
        if self.std is not None and any(s <= 0 for s in self.std):
            raise ValueError(f"std must be > 0, got {list(self.std)}")
        return self


class Checkpoint(StrictConfig):
    """One variant of a checkpoint family."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$",
                      description="the variant's name in profiles, plans and answers")
    format: Literal["timm", "hf", "torchscript"]
    path: str = Field(min_length=1, description="timm: a .safetensors/.pth state dict; hf: a "
                      "directory with config.json; torchscript: a .pt file")
    architecture: str | None = Field(
        None, description="timm: the model name given to timm.create_model (required)")
    num_classes: int | None = Field(None, gt=1, description="timm: the head's classes (default: "
                                    "read from the weights' last layer)")
    model_args: dict[str, Any] = Field(
        default_factory=dict, description="timm: keyword arguments of timm.create_model (e.g. "
                                          "img_size), as in a timm hub config.json")
    input: InputSpec = Field(default_factory=InputSpec)

    @model_validator(mode="after")
    def _architecture_for_timm(self) -> Checkpoint:
        if self.format == "timm" and not self.architecture:
            raise ValueError(f"checkpoint {self.name!r}: format timm needs `architecture` "
                             "(the timm model name, e.g. resnet18)")
        if self.format != "timm" and (self.architecture or self.model_args or self.num_classes):
            raise ValueError(f"checkpoint {self.name!r}: `architecture`, `model_args` and "
                             "`num_classes` are for timm only")
        return self


class CheckpointModel(StrictConfig):
    checkpoints: list[Checkpoint] = Field(min_length=1, max_length=16)
    labels: list[str] | None = Field(
        None, min_length=2, description="label names by index (default: the checkpoints' own "
                                        "id2label, else the dataset's folder names)")
    input: InputSpec = Field(default_factory=InputSpec,
                             description="defaults for every checkpoint's input")

    @model_validator(mode="after")
    def _unique_names(self) -> CheckpointModel:
        names = [c.name for c in self.checkpoints]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"checkpoint names must be unique; repeated: {dup}")
        return self


class ImportedModel(StrictConfig):
    import_path: str = Field(pattern=IMPORT_PATH,
                             description='"pkg.module:factory"; factory(**kwargs) returns a '
                                         "deployments.models.base.ServableModel")
    kwargs: dict[str, Any] = Field(default_factory=dict,
                                   description="JSON keyword arguments of the factory")


def _source_kind(value: Any) -> str | None:
    if isinstance(value, StrictConfig):
        value = value.model_dump()
    if not isinstance(value, dict):
        return None
    kinds = [k for k in ("builtin", "checkpoints", "import_path") if k in value]
    return kinds[0] if len(kinds) == 1 else None


ModelSource = Annotated[
    Annotated[BuiltinModel, Tag("builtin")] | Annotated[CheckpointModel, Tag("checkpoints")]
    | Annotated[ImportedModel, Tag("import_path")],
    Discriminator(_source_kind, custom_error_type="model_source",
                  custom_error_message="model: give exactly one of `builtin`, `checkpoints`, "
                                       "`import_path`")]


class DatasetConfig(StrictConfig):
    """Labelled data a family's accuracy per variant is measured on (held out: never the data
    the checkpoints were trained on)."""

    path: str = Field(min_length=1)
    format: Literal["imagefolder", "jsonl"] = Field(
        "imagefolder", description="imagefolder: <path>/<label>/<image>; jsonl: one "
        '{"inputs": {...}, "label": int or name, "task"?: str} per line')
    max_items: int = Field(1000, gt=1, description="at most this many items are read")
