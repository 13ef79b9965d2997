"""Token counts: cl100k_base's ranks from the bench extra, checked against tiktoken's published
SHA-256 before use; refused when tampered with; nothing counted when they cannot be had offline."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

import pytest

import uac_kernel.bench.aggregate as agg
from uac_kernel.bench import tokens as tk
from uac_kernel.core.errors import ChecksumMismatch

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting tokens never reaches for the network (tiktoken would download the ranks)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network connection attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def ranks() -> Path:
    found = tk.find_ranks()
    assert found is not None, "the bench extra ships cl100k_base's ranks (llama-index-core)"
    return found[0]


def test_the_hash_is_the_one_tiktoken_publishes() -> None:
    assert tk.cl100k_published() == (CL100K_URL, CL100K_SHA256)
    # the ranks file is named as tiktoken's cache names that URL
    assert tk.RANKS_SOURCES[0][1].endswith(hashlib.sha1(CL100K_URL.encode()).hexdigest())


def test_counts_come_from_the_checked_ranks(ranks: Path) -> None:
    assert hashlib.sha256(ranks.read_bytes()).hexdigest() == CL100K_SHA256
    cache_before = os.environ.get("TIKTOKEN_CACHE_DIR")
    counter = tk.TokenCounter()
    assert counter.available and counter.why == ""
    assert "llama-index-core" in counter.name and "SHA-256 checked" in counter.name
    assert counter.text("hello world") == 2
    assert counter.encoding.encode_ordinary("hello world") == [15339, 1917]
    assert counter.encoding.encode("<|endoftext|>", allowed_special="all") == [100257]
    assert counter.prompt("You answer.", ["Question: hello", " world"]) == sum(
        counter.text(t) or 0 for t in ("You answer.", "Question: hello", " world")
    )
    assert os.environ.get("TIKTOKEN_CACHE_DIR") == cache_before  # restored


def test_a_tampered_ranks_file_is_refused(ranks: Path, tmp_path: Path) -> None:
    lines = ranks.read_bytes().splitlines(keepends=True)
    token, rank = lines[1000].split()
    lines[1000] = token + b" " + str(int(rank) + 1).encode() + b"\n"  # one rank moved
    tampered = tmp_path / "cl100k_base.tiktoken"
    tampered.write_bytes(b"".join(lines))
    with pytest.raises(ChecksumMismatch, match=r"not the cl100k_base ranks tiktoken .* refused"):
        tk.TokenCounter(ranks=tampered)
    with pytest.raises(ChecksumMismatch):
        tk.load_cl100k(tampered)


def test_without_ranks_nothing_is_counted_and_the_results_say_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tk, "RANKS_SOURCES", (("uac-no-such-distribution", "ranks"),))
    counter = tk.TokenCounter()
    assert not counter.available
    assert counter.text("hello") is None and counter.prompt("s", ["p"]) is None
    assert "not counted" in counter.why and "pip install uac-no-such-distribution" in counter.why

    r = agg.run(
        sizes=(20,),
        variants=("clean",),
        patterns=("sum",),
        types=("Trip",),
        embeddings=False,
        progress=False,
        out_dir=tmp_path,
    )
    assert r.rows and all(row["prompt_tokens"] is None for row in r.rows)
    assert r.tokens() == {} and not r.tokens_counted
    assert r.meta["tokens_counted"] is False
    assert "unavailable offline" in r.meta["tokenizer"]
    assert counter.why in r.notes
    table = r.table()
    assert "prompt tokens per question: not counted" in table and counter.why in table
    saved = (tmp_path / r.paths[0].name).read_text()
    assert '"tokens_counted": false' in saved
    assert "prompt tokens not counted" in r.paths[2].read_text()  # the chart says it too
