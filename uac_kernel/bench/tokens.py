"""Prompt token counts with tiktoken's ``cl100k_base``, offline, from ranks checked before use.

tiktoken downloads an encoding's ranks (its BPE file) on first use, which offline cannot work.
The ranks come instead from an installed package that ships tiktoken's own file: llama-index-core
(MIT; run-llama, the LlamaIndex authors), in the ``bench`` extra, keeps it as
``llama_index/core/_static/tiktoken_cache/<key>``. uac reads that one file and never imports
llama_index.

Before use the file is checked against the SHA-256 that tiktoken itself publishes for
cl100k_base: read (not run) from ``cl100k_base()`` in the installed
``tiktoken_ext/openai_public.py``, with the URL whose cache key names the file. A file that
differs is refused with :class:`~uac_kernel.core.errors.ChecksumMismatch` and never reaches tiktoken.
The bytes that passed are handed to tiktoken through a private cache directory of their own,
where tiktoken's ``load_tiktoken_bpe(url, expected_hash=...)`` finds them, checks the hash
again on the bytes it parses and builds the encoding as it defines it (pattern, special
tokens). Nothing is fetched: a matching cached file is all tiktoken reads.

Without tiktoken the counter raises :class:`~uac_kernel.core.errors.MissingExtra`. With tiktoken
but no package that ships the ranks, it counts nothing: :attr:`TokenCounter.available` is
False, every count is ``None`` and :attr:`TokenCounter.why` says why — no estimate stands in.
"""

from __future__ import annotations

import ast
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from uac_kernel.core.errors import ChecksumMismatch
from uac_kernel.core.extras import require

__all__ = [
    "RANKS_SOURCES",
    "TokenCounter",
    "cl100k_published",
    "find_ranks",
    "load_cl100k",
]

ENCODING = "cl100k_base"

RANKS_SOURCES: tuple[tuple[str, str], ...] = (
    (
        "llama-index-core",
        "llama_index/core/_static/tiktoken_cache/9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    ),
)
"""Installed distributions that ship cl100k_base's ranks, and where (in the order tried)."""

_FEATURE = "counting prompt tokens (uac bench aggregate)"


def cl100k_published() -> tuple[str, str]:
    """``(url, sha256)`` that the installed tiktoken publishes for cl100k_base's ranks.

    Read from the syntax tree of ``cl100k_base()`` in ``tiktoken_ext/openai_public.py``: the
    ``load_tiktoken_bpe`` call's URL and its ``expected_hash``. Raises ``LookupError`` when that
    function does not have this shape (a tiktoken uac has not been checked against).
    """
    openai_public = require("tiktoken_ext.openai_public", extra="bench", feature=_FEATURE)
    source = Path(str(openai_public.__file__))
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == ENCODING:
            for call in ast.walk(node):
                if not (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id == "load_tiktoken_bpe"
                    and call.args
                    and isinstance(call.args[0], ast.Constant)
                ):
                    continue
                hashes = [
                    k.value.value
                    for k in call.keywords
                    if k.arg == "expected_hash" and isinstance(k.value, ast.Constant)
                ]
                url = call.args[0].value
                if hashes and isinstance(url, str) and isinstance(hashes[0], str):
                    return url, hashes[0]
    raise LookupError(f"{source}: no load_tiktoken_bpe(URL, expected_hash=...) in {ENCODING}()")


def find_ranks() -> tuple[Path, str] | None:
    """The first installed file of :data:`RANKS_SOURCES` and ``"<distribution> <version>"``."""
    for dist_name, relative in RANKS_SOURCES:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        path = Path(str(dist.locate_file(relative)))
        if path.is_file():
            return path, f"{dist_name} {dist.version}"
    return None


@contextmanager
def _tiktoken_cache(directory: str) -> Iterator[None]:
    """tiktoken's cache directory set to ``directory`` for the block (tiktoken reads it from
    the environment at each load), then restored."""
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = directory
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


def load_cl100k(path: Path) -> Any:
    """The cl100k_base ``tiktoken.Encoding`` from the ranks in ``path``, checked first.

    Raises :class:`ChecksumMismatch` if ``path`` is not the file tiktoken publishes.
    """
    tiktoken = require("tiktoken", extra="bench", feature=_FEATURE)
    openai_public = require("tiktoken_ext.openai_public", extra="bench", feature=_FEATURE)
    url, expected = cl100k_published()
    data = Path(path).read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ChecksumMismatch(
            f"{path}: these are not the {ENCODING} ranks tiktoken {tiktoken.__version__} "
            f"publishes (SHA-256 {actual[:16]}…, expected {expected[:16]}…); refused — "
            "reinstall the package that ships them: pip install --force-reinstall llama-index-core"
        )
    key = hashlib.sha1(url.encode()).hexdigest()  # the name tiktoken's cache gives this URL
    with tempfile.TemporaryDirectory(prefix="uac-tiktoken-") as cache:
        Path(cache, key).write_bytes(data)
        with _tiktoken_cache(cache):
            params = openai_public.ENCODING_CONSTRUCTORS[ENCODING]()
    return tiktoken.Encoding(**params)


class TokenCounter:
    """cl100k_base token counts of prompts (message contents; no chat-format overhead).

    ``ranks``: a cl100k_base ranks file to use (checked like any other); by default the first
    of :data:`RANKS_SOURCES` that is installed. When none is, :attr:`available` is False and
    every count is ``None``.
    """

    def __init__(self, ranks: str | Path | None = None) -> None:
        tiktoken = require("tiktoken", extra="bench", feature=_FEATURE)
        self.encoding: Any = None
        self.why = ""
        if ranks is not None:
            found: tuple[Path, str] | None = (Path(ranks), str(ranks))
        else:
            found = find_ranks()
        if found is None:
            sources = ", ".join(name for name, _ in RANKS_SOURCES)
            self.why = (
                f"prompt tokens not counted: {ENCODING}'s ranks are not installed and tiktoken "
                f"would download them, which uac does not do: pip install {sources} "
                "(the bench extra's source of them)"
            )
        else:
            path, origin = found
            try:
                self.encoding = load_cl100k(path)
            except LookupError as exc:  # no published hash to check against: use nothing
                self.why = f"prompt tokens not counted: {exc}"
        if self.encoding is None:
            self.name = f"none ({ENCODING} ranks unavailable offline)"
        else:
            self.name = (
                f"{ENCODING} (tiktoken {tiktoken.__version__}; ranks from {origin}, "
                "SHA-256 checked against tiktoken's)"
            )
        self._cache: dict[str, int] = {}

    @property
    def available(self) -> bool:
        """Whether counts are made (False: the ranks could not be had offline)."""
        return self.encoding is not None

    def text(self, text: str) -> int | None:
        if self.encoding is None:
            return None
        n = self._cache.get(text)
        if n is None:
            n = len(self.encoding.encode_ordinary(text))
            if len(self._cache) < 100_000:
                self._cache[text] = n
        return n

    def prompt(self, system: str, parts: Sequence[str]) -> int | None:
        if self.encoding is None:
            return None
        return sum(self.text(t) or 0 for t in (system, *parts))
