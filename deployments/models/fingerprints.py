"""One fingerprint of model files, for every path a replica loads from (a chat model directory,
a classifier's checkpoints or trained weights): a sha256 over each file's name, size and
contents, whole up to 16 MiB (configs, tokenizers, small weights), else its first and last MiB,
so a multi-GB model is fingerprinted in milliseconds. Torch-free (the ingress uses it)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from io import BufferedReader
from pathlib import Path

WHOLE_UP_TO_BYTES = 16 << 20
SAMPLE_BYTES = 1 << 20


def files_fingerprint(files: Iterable[tuple[str, Path]]) -> str:
    """sha256 over (name, size, contents digest) of each (name, file), in the order given;
    an unreadable file is a FileNotFoundError naming it."""
    digest = hashlib.sha256()
    for name, f in files:
        try:
            with f.open("rb") as fh:
                size = f.stat().st_size
                digest.update(f"{name}\0{size}\0".encode())
                digest.update(_contents_digest(fh, size))
        except OSError as exc:
            raise FileNotFoundError(f"{name} is unreadable: {exc.strerror or exc}") from None
    return digest.hexdigest()


def _contents_digest(f: BufferedReader, size: int) -> bytes:
    if size <= WHOLE_UP_TO_BYTES:
        return hashlib.file_digest(f, "sha256").digest()
    head = f.read(SAMPLE_BYTES)
    f.seek(size - SAMPLE_BYTES)
    return hashlib.sha256(head + f.read(SAMPLE_BYTES)).digest()
