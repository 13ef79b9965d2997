"""The embedding model's files are checked against their reviewed SHA-256 before anything loads
them (docs/embeddings-model.md): a changed, missing or added file is refused."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from uac_kernel.bench import minilm
from uac_kernel.core.errors import ChecksumMismatch, MissingExtra

ROOT = Path(__file__).resolve().parents[2]


def small_model_dir(tmp_path: Path) -> Path:
    """A directory with every reviewed file name, holding other bytes."""
    d = tmp_path / "model"
    for name in minilm.MODEL_FILES:
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(f"not the real {name}\n")
    return d


def installed() -> Path:
    try:
        return minilm.model_dir()
    except MissingExtra:
        pytest.skip("the embeddings extra is not installed")


def test_files_that_differ_are_refused(tmp_path: Path) -> None:
    d = small_model_dir(tmp_path)
    with pytest.raises(ChecksumMismatch, match=r"\.gitattributes: SHA-256 differs.*refused"):
        minilm.verify_model_dir(d)
    with pytest.raises(ChecksumMismatch):
        minilm.load_model(d)  # refused before sentence-transformers reads anything


def test_an_added_or_a_missing_file_is_refused(tmp_path: Path) -> None:
    d = small_model_dir(tmp_path)
    (d / "pytorch_model.bin").write_bytes(b"\0")
    (d / "model.safetensors").unlink()
    with pytest.raises(
        ChecksumMismatch, match=r"unexpected pytorch_model\.bin; missing model\.safetensors"
    ):
        minilm.verify_model_dir(d)


def test_the_manifest_is_the_one_the_docs_record() -> None:
    doc = (ROOT / "docs" / "embeddings-model.md").read_text()
    size, digest = minilm.MODEL_FILES["model.safetensors"]
    assert digest in doc and f"{size:,}" in doc
    for name, (_, sha) in minilm.MODEL_FILES.items():
        assert f"`{name}`" in doc and sha in doc, name


def test_the_installed_model_verifies_and_a_changed_weight_is_refused(tmp_path: Path) -> None:
    d = installed()
    minilm.verify_model_dir(d)
    copy = tmp_path / "model"
    shutil.copytree(d, copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data))
    assert hashlib.sha256(data).hexdigest() != minilm.MODEL_FILES["model.safetensors"][1]
    with pytest.raises(ChecksumMismatch, match=r"model\.safetensors: SHA-256 differs"):
        minilm.verify_model_dir(copy)
