"""The model directory the chat stages and the ingress load from a path
(deployments/generation/model_files.py): its fingerprint, the replicas' check against it, the
errors naming the path, and the application's arguments staying small whatever the weights."""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from deployments.generation.model_files import ModelDir
from deployments.models import fingerprints
from tests.helpers.chat_renderer import prompt_model_dir

WEIGHTS_BYTES = 5 << 20


def plain_dir(path: Path) -> Path:
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"w" * 10)
    return path


def test_the_fingerprint_covers_the_engine_files_only(tmp_path: Path) -> None:
    src = plain_dir(tmp_path / "m")
    before = ModelDir.at(src, "m")
    assert before.path == str(src.absolute()) and before.name == "m"
    (src / "train.log").write_text("not an engine file")
    assert ModelDir.at(src, "m").fingerprint == before.fingerprint
    (src / "config.json").write_text('{"a": 1}')
    assert ModelDir.at(src, "m").fingerprint != before.fingerprint


def test_large_weights_are_fingerprinted_by_size_and_their_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprints, "WHOLE_UP_TO_BYTES", 4096)
    monkeypatch.setattr(fingerprints, "SAMPLE_BYTES", 1024)
    src = plain_dir(tmp_path / "m")
    weights = bytearray(b"w" * 10_000)
    (src / "model.safetensors").write_bytes(weights)
    first = ModelDir.at(src, "m").fingerprint
    weights[-1:] = b"x"  # the last tensor of another fine-tune: another fingerprint
    (src / "model.safetensors").write_bytes(weights)
    assert ModelDir.at(src, "m").fingerprint != first
    weights[5000:5001] = b"y"  # the middle of a large file is not read
    (src / "model.safetensors").write_bytes(weights)
    second = ModelDir.at(src, "m").fingerprint
    weights[5000:5001] = b"z"
    (src / "model.safetensors").write_bytes(weights)
    assert ModelDir.at(src, "m").fingerprint == second


@pytest.mark.parametrize("make, says", [
    (lambda p: None, "no such directory"),
    (lambda p: p.write_text("x"), "not a directory"),
    (lambda p: p.mkdir(), "no config.json"),
])
def test_a_missing_or_wrong_directory_fails_naming_it(tmp_path: Path, make: Any,
                                                       says: str) -> None:
    path = tmp_path / "model"
    make(path)
    with pytest.raises(FileNotFoundError, match=f"model directory {path}: {says}"):
        ModelDir.at(path, "m")


def test_an_unreadable_file_fails_naming_it(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    src = plain_dir(tmp_path / "m")
    real_open = Path.open

    def refusing(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "model.safetensors":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refusing)
    with pytest.raises(FileNotFoundError, match=f"model directory {src}: model.safetensors "
                                                "is unreadable: Permission denied"):
        ModelDir.at(src, "m")


def test_a_replica_refuses_a_path_holding_other_files(tmp_path: Path) -> None:
    src = plain_dir(tmp_path / "m")
    seen = ModelDir.at(src, "m")
    assert seen.verified() == seen
    (src / "model.safetensors").write_bytes(b"v" * 10)  # another copy on this node
    found = ModelDir.at(src, "m").fingerprint
    with pytest.raises(ValueError, match=f"{src} on node .* holds other files than the builder "
                                         f"read \\(fingerprint {found[:16]}, the builder's "
                                         f"{seen.fingerprint[:16]}\\)"):
        seen.verified()
    (src / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=f"model directory {src}: no config.json"):
        seen.verified()


def test_the_chat_stages_arguments_are_small_whatever_the_weights(tmp_path: Path) -> None:
    """What `.bind(...)` receives for LLMBackend, ImageEncoder and the ingress's chat graph:
    the path and a fingerprint, not the model's files."""
    from app.chat_graph import bind_chat
    from deployments.ingress.chat.config import GenerationConfig
    from deployments.models.vlm.tokenizer import build_tokenizer

    directory = tmp_path / "model"
    tok = build_tokenizer()
    tok.save_pretrained(directory)
    model = prompt_model_dir(directory, tok)
    (directory / "model.safetensors").write_bytes(b"\0" * WEIGHTS_BYTES)
    graph = bind_chat(GenerationConfig(), ModelDir.at(directory, "vlm"), lambda o: o)
    stages = graph.probes()
    assert set(stages) == {"LLMBackend", "ImageEncoder"}
    sizes = {name: len(cloudpickle.dumps(  # the bound deployment: Serve's, not public
        (app._bound_deployment.init_args, app._bound_deployment.init_kwargs)))
        for name, app in stages.items()}
    sizes["ingress"] = len(cloudpickle.dumps(dataclasses.replace(graph, llm=None,
                                                                 encoder=None)))
    assert max(sizes.values()) < 16_000, sizes
    assert graph.model.path == model.path
