"""A final adversarial pass over issue 12: hostile model answers and endpoints, the review flow,
ask certificates, the SQL view, and what reaches a terminal or a notebook.

Written apart from the code and from the other attack files. Everything is real: DuckDB files in
``tmp_path``, the ``openai`` client against ``uac_kernel.model.testing.ChatServer`` (or a raw socket
server for what ChatServer cannot send), the command line through subprocesses. The 26 bugs this
pass found were fixed; their cases, once strict xfails, now pass like the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import fact

from uac_kernel.core.errors import EventError, ModelError, QueryError, ReviewError
from uac_kernel.model.client import ModelSettings, list_calls
from uac_kernel.model.extract import ExtractionLimits
from uac_kernel.model.testing import ChatServer, Reply
from uac_kernel.workbench import Workbench

ESC = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"  # retitle, clear, recolour
BIDI = "\u202e\u200b"  # a right-to-left override and a zero-width space
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}

HISTORY = [
    fact("2025-01-10", "add", "Trip", "trip-lisbon", destination="Lisbon", nights=4),
    fact("2025-01-11", "add", "Trip", "trip-oslo", destination="Oslo", nights=2),
    fact("2025-01-12", "add", "Medication", "med-statin", name="atorvastatin", active=True),
    *[fact("2025-01-13", "add", "Book", f"book-{c}", title=f"tome {c}") for c in "abcdefghij"],
]
RECORDS = len(HISTORY)


def turn(source: str, text: str, ts: str = "2025-03-01T09:00:00", speaker: str = "user") -> dict:
    return {"kind": "utterance", "ts": ts, "speaker": speaker, "text": text, "source": source}


TURN = turn("t#1", "Our Lisbon flight moved to the eighteenth.")


def op(
    kind: str, type_: str, key: str, *, cites: list[str] | None = None, reason: str = "", **f: Any
) -> dict[str, Any]:
    return {
        "op": kind,
        "type": type_,
        "key": key,
        "fields": [{"name": k, "value": v} for k, v in f.items()],
        **({"reason": reason} if reason else {}),
        "utterances": ["t#1"] if cites is None else cites,
    }


def answer(*ops: dict[str, Any]) -> str:
    return json.dumps({"operations": list(ops)})


def body(content: str, usage: Any = USAGE, finish: str = "stop", **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 0,
        "model": "stand-in",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        **extra,
    }
    if usage is not None:
        found["usage"] = usage
    return found


MOVE = answer(op("update", "Trip", "trip-lisbon", end="2025-03-18"))


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


def settings_for(base_url: str, deadline: float = 30.0) -> ModelSettings:
    return ModelSettings(
        model="stand-in", base_url=base_url, timeout=5.0, max_retries=0, deadline=deadline
    )


@pytest.fixture
def wb(tmp_path: Path, server: ChatServer) -> Iterator[Workbench]:
    with Workbench(tmp_path / "u.duckdb", user="maya", model=settings_for(server.base_url)) as wb:
        wb.ingest(HISTORY)
        wb.ingest([TURN])
        yield wb


def log_of(wb: Workbench) -> list[tuple[int, str]]:
    return [(e.seq, e.hash) for e in wb.store.events()]


def current(wb: Workbench) -> dict[str, dict[str, Any]]:
    return {f"{t} {r.key}": r.fields() for t in sorted(wb.state.types) for r in wb.state.all(t)}


def held_batch(wb: Workbench, server: ChatServer) -> int:
    """Hold one answer: four operations, one on a record the turn does not mention."""
    server.enqueue(
        answer(
            op("update", "Trip", "trip-lisbon", end="2025-03-18"),
            op("add", "Flight", "fl-1", day="2025-03-18"),
            op("update", "Medication", "med-statin", active=False),
            op("retract", "Trip", "trip-lisbon", reason="moved"),
        )
    )
    assert wb.extract(progress=False).held == 1
    (batch,) = wb.review()
    return batch.id


# == hold rules: mass changes smuggled past review ==============================================


@pytest.mark.parametrize(
    "keys",
    [
        pytest.param(["trip-2025-a", "trip-2025-b", "trip-2025-c"], id="year-of-the-timestamp"),
        pytest.param(["chat-notes", "chat-rules", "chat-plan"], id="token-of-the-source"),
        pytest.param(["user-pin", "user-bank", "user-card"], id="the-speaker-name"),
    ],
)
def test_turn_metadata_does_not_count_as_a_mention(
    tmp_path: Path, server: ChatServer, keys: list[str]
) -> None:
    with Workbench(tmp_path / "m.duckdb", user="maya", model=settings_for(server.base_url)) as wb:
        wb.ingest([fact("2025-01-01", "add", "Secret", k, note="x") for k in keys])
        wb.ingest([turn("chat-9#1", "hello there, nice weather")])
        server.enqueue(answer(*[op("retract", "Secret", k, cites=["chat-9#1"]) for k in keys]))
        report = wb.extract(progress=False)
        assert (report.applied, report.held) == (0, 1)
        assert wb.state.counts() == {"Secret": 3}


def test_many_small_batches_cannot_wipe_a_memory_unreviewed(
    tmp_path: Path, server: ChatServer
) -> None:
    with Workbench(tmp_path / "b.duckdb", user="maya", model=settings_for(server.base_url)) as wb:
        wb.ingest(HISTORY)
        books = [f"book-{c}" for c in "abcdefghij"]
        said = "All my books, every tome, a b c d e f g h i j, are gone."
        wb.ingest([turn(f"w#{i}", said, ts=f"2025-03-0{i + 1}T09:00:00") for i in range(4)])
        for i in range(4):
            chunk = books[i * 3 : i * 3 + 3]
            server.enqueue(answer(*[op("retract", "Book", k, cites=[f"w#{i}"]) for k in chunk]))
        report = wb.extract(progress=False, batch_size=1)
        assert wb.state.counts().get("Book", 0) >= 7, report.summary()


def test_retract_then_re_add_of_each_record_counts_as_an_overwrite(
    wb: Workbench, server: ChatServer
) -> None:
    # Retracting and re-adding a record in one answer rewrites it wholesale: four of them are
    # more than the floor of 3, whatever the turn mentions.
    pairs = []
    for t, k in [("Trip", "trip-lisbon"), ("Trip", "trip-oslo"), ("Book", "book-a")]:
        pairs += [op("retract", t, k), op("add", t, k, destination="Nowhere")]
    pairs += [op("retract", "Medication", "med-statin"), op("add", "Medication", "med-statin")]
    before = current(wb)
    server.enqueue(answer(*pairs))
    assert wb.extract(progress=False).held == 1
    assert current(wb) == before


def test_updates_that_clear_fields_count_as_overwrites(tmp_path: Path, server: ChatServer) -> None:
    with Workbench(tmp_path / "c.duckdb", user="maya", model=settings_for(server.base_url)) as wb:
        towns = ["lisbon", "porto", "faro", "braga"]
        wb.ingest([fact("2025-01-01", "add", "Trip", f"trip-{t}", nights=2) for t in towns])
        wb.ingest([turn("t#1", "Lisbon Porto Faro Braga: no idea how many nights any more.")])
        server.enqueue(answer(*[op("update", "Trip", f"trip-{t}", nights=None) for t in towns]))
        assert wb.extract(progress=False).held == 1
        assert {r.nights for r in wb.state.all("Trip")} == {2}


def test_add_over_an_existing_key_is_refused_not_applied(wb: Workbench, server: ChatServer) -> None:
    bad = answer(op("add", "Trip", "trip-lisbon", destination="Mars"))
    server.enqueue(bad, bad)
    log = log_of(wb)
    report = wb.extract(progress=False)
    assert (report.applied, report.held, report.pending) == (0, 0, 1)
    assert "Trip 'trip-lisbon'" in report.errors[0] and "\n" not in report.errors[0]
    assert log_of(wb) == log


@pytest.mark.parametrize(
    ("cites", "shown"),
    [
        pytest.param(["t#2"], "['t#2']", id="a-turn-of-the-next-batch"),
        pytest.param(["nope"], "['nope']", id="a-source-that-does-not-exist"),
        pytest.param([], "none", id="no-turn-at-all"),
        pytest.param(["t#1", "t#2"], "['t#2']", id="one-of-this-batch-one-of-another"),
    ],
)
def test_operations_must_cite_their_own_batch(
    wb: Workbench, server: ChatServer, cites: list[str], shown: str
) -> None:
    wb.ingest([turn("t#2", "And the Oslo trip is off.", ts="2025-03-02T09:00:00")])
    bad = answer(op("add", "Flight", "fl-9", day="2025-03-18", cites=cites))
    server.enqueue(bad, bad, answer())
    log = log_of(wb)
    report = wb.extract(progress=False, batch_size=1)
    assert report.errors == [
        "extraction of t#1..t#1:1: field 'utterances': utterances must name sources of this "
        f"batch's turns; got {shown}"
    ]
    assert (report.applied, report.pending) == (1, 1)  # batch t#2 answered with nothing
    assert "Flight" not in wb.state.types
    assert [e.kind for e in wb.store.events()][len(log) :] == ["extraction"]


def test_exactly_at_every_cap_applies(wb: Workbench, server: ChatServer) -> None:
    # 10 new types, 60 new fields, 100 operations: the caps are inclusive.
    six: list[dict[str, Any]] = [{f"f{i}_{j}": j for j in range(6)} for i in range(10)]
    ops = [op("add", f"Kind{i}", f"k{i}", **six[i]) for i in range(10)]
    ops += [op("add", "Kind0", f"more{i}", f0_0=i) for i in range(90)]
    server.enqueue(answer(*ops))
    report = wb.extract(progress=False)
    assert (report.applied, report.operations) == (1, 100)
    assert wb.state.counts()["Kind0"] == 91


def test_one_over_the_new_fields_of_one_event_is_refused(wb: Workbench, server: ChatServer) -> None:
    # With the batch cap raised, an operation still meets Limits.new_fields_per_event (100).
    many: dict[str, Any] = {f"f{j}": j for j in range(101)}
    wide = answer(op("add", "Wide", "w", **many))
    server.enqueue(wide, wide)
    log = log_of(wb)
    report = wb.extract(progress=False, limits=ExtractionLimits(max_new_fields=500))
    assert report.errors == [
        "extraction of t#1..t#1:1: field 'fields.f100': the event adds more than 100 new fields "
        "to Wide; a real record never needs that many at once: split it into several types"
    ]
    assert log_of(wb) == log


def test_a_value_past_the_value_limit_is_refused(tmp_path: Path, server: ChatServer) -> None:
    from uac_kernel.core.limits import Limits

    path = tmp_path / "v.duckdb"
    with Workbench(
        path, user="maya", model=settings_for(server.base_url), limits=Limits(value_chars=1000)
    ) as wb:
        wb.ingest([TURN])
        big = answer(op("add", "Note", "n", text="x" * 1001))
        server.enqueue(big, big)
        report = wb.extract(progress=False)
        assert report.pending == 1 and "fields.text" in report.errors[0]
        assert "Note" not in wb.state.types


# == hostile answers: valid JSON, hostile shapes ===============================================


def test_deeply_nested_answer_is_invalid_and_stays_pending(
    wb: Workbench, server: ChatServer
) -> None:
    deep = '{"operations": [' + "[" * 20_000 + "]" * 20_000 + "]}"
    server.enqueue(deep, deep)
    log = log_of(wb)
    report = wb.extract(progress=False)
    assert (report.applied, report.pending) == (0, 1)
    assert "\n" not in report.errors[0] and len(report.errors[0]) < 1000
    assert log_of(wb) == log


def test_a_lone_surrogate_in_a_key_is_refused(wb: Workbench, server: ChatServer) -> None:
    bad = answer(op("add", "Note", "k\ud800", text="x"))
    assert "\\ud800" in bad
    server.enqueue(bad, bad)
    log = log_of(wb)
    report = wb.extract(progress=False)
    assert (report.applied, report.pending) == (0, 1) and log_of(wb) == log


def test_nan_in_an_answer_is_refused(wb: Workbench, server: ChatServer) -> None:
    bad = answer(op("add", "Note", "n1", score=1.5)).replace("1.5", "NaN")
    server.enqueue(bad, bad)
    log = log_of(wb)
    report = wb.extract(progress=False)
    assert (report.applied, report.pending) == (0, 1)
    assert "NaN" in report.errors[0] and log_of(wb) == log


def test_duplicated_keys_the_record_and_the_applied_answer_agree(
    wb: Workbench, server: ChatServer
) -> None:
    # Two "operations" keys, and two "content" keys in the message: whichever a parser keeps,
    # what is applied is what the call record keeps (review and replay read the record).
    wipe = [op("retract", "Book", f"book-{c}") for c in "abcdefghij"]
    content = '{"operations": ' + json.dumps(wipe) + ', "operations": []}'
    raw = json.dumps(body(content))
    raw = raw.replace('"content": ', '"content": "{\\"operations\\": []}", "content": ', 1)
    server.enqueue(Reply(raw_body=raw))
    report = wb.extract(progress=False)
    (call,) = list_calls(wb.store)
    row = wb.store.con.execute(
        "SELECT content FROM model_calls WHERE call_id = ?", [call.call_id]
    ).fetchone()
    assert row is not None
    (kept,) = row
    assert report.applied == 1 and report.operations == 0
    assert kept == content  # the last "content"; its last "operations" is what was applied
    assert wb.state.counts()["Book"] == 10


@pytest.mark.parametrize("finish", ["length", "content_filter"])
def test_a_cut_or_filtered_answer_is_a_recorded_one_line_error(
    wb: Workbench, server: ChatServer, finish: str
) -> None:
    raw = json.dumps(body(MOVE, finish=finish))
    server.enqueue(Reply(raw_body=raw), Reply(raw_body=raw))
    log = log_of(wb)
    try:
        report = wb.extract(progress=False)
    except ModelError as exc:
        assert "\n" not in str(exc)
    else:
        assert report.pending == 1
    assert log_of(wb) == log
    assert list_calls(wb.store) and list_calls(wb.store)[0].outcome != "ok"


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        pytest.param({"prompt_tokens": "12"}, "usage.prompt_tokens = '12'", id="numeric-string"),
        pytest.param({"prompt_tokens": 1e3}, "usage.prompt_tokens = 1000.0", id="exponent-float"),
        pytest.param({"prompt_tokens": [1]}, "usage.prompt_tokens = [1]", id="a-list"),
        pytest.param({"completion_tokens": {}}, "usage.completion_tokens = {}", id="an-object"),
        pytest.param(
            {"prompt_tokens": 100_000_001}, "usage.prompt_tokens = 100000001", id="one-over-max"
        ),
        pytest.param([1, 2], "usage = [1, 2]", id="usage-a-list"),
        pytest.param(False, "usage = False", id="usage-false"),
    ],
)
def test_token_counts_that_are_not_counts(
    wb: Workbench, server: ChatServer, usage: Any, shown: str
) -> None:
    server.enqueue(Reply(raw_body=json.dumps(body(MOVE, usage=usage))))
    log = log_of(wb)
    with pytest.raises(ModelError) as info:
        wb.extract(progress=False)
    assert f"reported {shown}, not a token count" in str(info.value)
    assert log_of(wb) == log
    assert [c.outcome for c in list_calls(wb.store)] == ["error: bad usage"]


def test_the_largest_token_count_is_accepted(wb: Workbench, server: ChatServer) -> None:
    counts = {"prompt_tokens": 100_000_000, "completion_tokens": 0}
    server.enqueue(Reply(raw_body=json.dumps(body(MOVE, usage=counts))))
    assert wb.extract(progress=False).applied == 1
    (call,) = list_calls(wb.store)
    assert (call.tokens_in, call.tokens_out) == (100_000_000, 0)


def test_nan_in_the_body_is_not_a_completion(wb: Workbench, server: ChatServer) -> None:
    raw = json.dumps(body(MOVE)).replace('"prompt_tokens": 100', '"prompt_tokens": NaN')
    server.enqueue(Reply(raw_body=raw))
    log = log_of(wb)
    with pytest.raises(ModelError, match="body that is not a chat completion"):
        wb.extract(progress=False)
    assert log_of(wb) == log


def test_200_with_an_empty_json_body(wb: Workbench, server: ChatServer) -> None:
    server.enqueue(Reply(raw_body=""))
    log = log_of(wb)
    with pytest.raises(ModelError) as info:
        wb.extract(progress=False)
    assert "application/json body that is not a chat completion (it starts '')" in str(info.value)
    assert log_of(wb) == log


def test_a_gzip_header_on_a_plain_body(wb: Workbench, server: ChatServer) -> None:
    # The header is smuggled in through the content type line ChatServer writes.
    lie = Reply(
        raw_body=json.dumps(body(MOVE)), content_type="application/json\r\nContent-Encoding: gzip"
    )
    server.enqueue(lie)
    log = log_of(wb)
    with pytest.raises(ModelError) as info:
        wb.extract(progress=False)
    assert "\n" not in str(info.value) and str(info.value).endswith("; nothing was appended")
    assert log_of(wb) == log
    assert list_calls(wb.store)[0].outcome.startswith("error: ")


def test_a_redirect_to_another_host_is_not_followed(wb: Workbench, server: ChatServer) -> None:
    with ChatServer() as other:
        other.enqueue(answer(op("add", "Planted", "p", text="from elsewhere")))
        target = f"{other.base_url}/chat/completions"
        server.enqueue(
            Reply(status=307, raw_body="", content_type=f"text/plain\r\nLocation: {target}")
        )
        with contextlib.suppress(ModelError):
            wb.extract(progress=False)
        assert "Planted" not in wb.state.types


# -- a raw endpoint: what ChatServer cannot send ------------------------------------------------


class RawEndpoint:
    """A socket server that answers each POST with ``script(sock, request_body)``."""

    def __init__(self, script: Callable[[socket.socket, bytes], None]):
        self.stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = self.request
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, rest = data.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(rest) < length:
                    rest += sock.recv(65536)
                with contextlib.suppress(OSError):
                    script(sock, rest)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> RawEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def raw_wb(tmp_path: Path, url: str, deadline: float = 30.0) -> Workbench:
    wb = Workbench(tmp_path / "r.duckdb", user="maya", model=settings_for(url, deadline))
    wb.ingest(HISTORY)
    wb.ingest([TURN])
    return wb


def test_a_chunked_body_is_read_whole_and_applied(tmp_path: Path) -> None:
    data = json.dumps(body(MOVE)).encode()

    def script(sock: socket.socket, _: bytes) -> None:
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        for i in range(0, len(data), 7):
            piece = data[i : i + 7]
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        sock.sendall(b"0\r\n\r\n")

    with RawEndpoint(script) as ep, raw_wb(tmp_path, ep.base_url) as wb:
        assert wb.extract(progress=False).applied == 1
        assert str(wb.state.get("Trip", "trip-lisbon").end) == "2025-03-18"  # type: ignore[union-attr]


def test_an_endpoint_that_closes_mid_body(tmp_path: Path) -> None:
    data = json.dumps(body(MOVE)).encode()

    def script(sock: socket.socket, _: bytes) -> None:
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data[: len(data) // 2]
        )
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    with RawEndpoint(script) as ep, raw_wb(tmp_path, ep.base_url) as wb:
        log = log_of(wb)
        with pytest.raises(ModelError) as info:
            wb.extract(progress=False)
        assert "\n" not in str(info.value) and "nothing was appended" in str(info.value)
        assert log_of(wb) == log
        assert [c.outcome for c in list_calls(wb.store)] == ["error: APIConnectionError"]


def test_a_drip_under_the_deadline_then_a_stall_fails_at_the_deadline(tmp_path: Path) -> None:
    data = json.dumps(body(MOVE)).encode()
    stop = threading.Event()

    def script(sock: socket.socket, _: bytes) -> None:
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(data)}\r\n\r\n".encode()
        )
        for b in data[:20]:  # a byte every 50 ms, each well within the 5 s read timeout
            sock.sendall(bytes([b]))
            time.sleep(0.05)
        stop.wait(30)  # then nothing (the test ends it)

    with RawEndpoint(script) as ep, raw_wb(tmp_path, ep.base_url, deadline=2.0) as wb:
        log = log_of(wb)
        with pytest.raises(ModelError, match="no complete answer within its deadline of 2 s"):
            wb.extract(progress=False)
        stop.set()
        assert log_of(wb) == log
        assert [c.outcome for c in list_calls(wb.store)] == ["error: deadline"]


# == the review flow ===========================================================================


def test_accept_twice_the_second_is_refused(wb: Workbench, server: ChatServer) -> None:
    b = held_batch(wb, server)
    wb.accept(b, only=[1, 2])
    log = log_of(wb)
    with pytest.raises(ReviewError, match=rf"^no batch {b} is held for review of user 'maya'"):
        wb.accept(b, only=[3])
    assert log_of(wb) == log


def test_reject_then_accept_is_refused(wb: Workbench, server: ChatServer) -> None:
    b = held_batch(wb, server)
    wb.reject(b)
    log = log_of(wb)
    with pytest.raises(ReviewError, match=rf"^no batch {b} is held"):
        wb.accept(b)
    with pytest.raises(ReviewError, match=rf"^no batch {b} is held"):
        wb.reject(b)
    assert log_of(wb) == log and current(wb)["Trip trip-lisbon"]["nights"] == 4


def test_accept_only_the_retraction_then_the_batch_is_decided(
    wb: Workbench, server: ChatServer
) -> None:
    # Operation 4 retracts what operation 1 updates: accepting 4 alone decides the batch, so
    # operation 1 cannot be accepted later against the retracted record.
    b = held_batch(wb, server)
    wb.accept(b, only=[4])
    assert wb.state.get("Trip", "trip-lisbon") is None
    assert wb.review() == []


def test_accept_after_the_schema_changed_is_refused(wb: Workbench, server: ChatServer) -> None:
    b = held_batch(wb, server)
    wb.ingest([fact("2025-03-02", "add", "Flight", "fl-0", day=5)])  # day is an int now
    log = log_of(wb)
    with pytest.raises(EventError, match=r"fields\.day"):
        wb.accept(b, only=[2])
    assert log_of(wb) == log and len(wb.review()) == 1


def test_accept_after_the_held_turn_was_forgotten(wb: Workbench, server: ChatServer) -> None:
    b = held_batch(wb, server)
    wb.forget(source="t#1")
    log = log_of(wb)
    with pytest.raises(ReviewError) as info:
        wb.accept(b)
    assert "\n" not in str(info.value) and f"uac review reject {b}" in str(info.value)
    assert log_of(wb) == log
    wb.reject(b)
    assert wb.review() == []


@pytest.mark.parametrize(
    ("only", "message"),
    [
        pytest.param([0], "held batch {b} has no operation 0 (it has 1 to 4)", id="zero"),
        pytest.param([-3, 1], "held batch {b} has no operation -3 (it has 1 to 4)", id="negative"),
        pytest.param([10**30], f"held batch {{b}} has no operation {10**30}", id="huge"),
    ],
)
def test_accept_only_with_numbers_that_are_not_operations(
    wb: Workbench, server: ChatServer, only: list[int], message: str
) -> None:
    b = held_batch(wb, server)
    log = log_of(wb)
    with pytest.raises(ReviewError) as info:
        wb.accept(b, only=only)
    assert str(info.value).startswith(message.format(b=b))
    assert log_of(wb) == log


def test_accept_only_with_duplicates_applies_each_once(wb: Workbench, server: ChatServer) -> None:
    b = held_batch(wb, server)
    wb.accept(b, only=[2, 2, 2])
    (decision,) = [e for e in wb.log(kinds=["review"]) if e.payload["state"] == "accepted"]
    assert decision.payload["operations"] == [2]
    assert [r.key for r in wb.state.all("Flight")] == ["fl-1"]


def test_a_batch_of_another_user_cannot_be_decided(tmp_path: Path, server: ChatServer) -> None:
    path = tmp_path / "two.duckdb"
    with Workbench(path, user="alice", model=settings_for(server.base_url)) as alice:
        alice.ingest(HISTORY)
        alice.ingest([TURN])
        b = held_batch(alice, server)
    with Workbench(path, user="bob", model=settings_for(server.base_url)) as bob:
        bob.ingest(HISTORY)
        log = log_of(bob)
        with pytest.raises(ReviewError, match=rf"^no batch {b} is held for review of user 'bob'"):
            bob.accept(b)
        with pytest.raises(ReviewError, match=rf"^no batch {b} is held for review of user 'bob'"):
            bob.reject(b)
        assert log_of(bob) == log and bob.review() == []
    with Workbench(path, user="alice") as alice:
        assert [h.id for h in alice.review()] == [b]


def test_an_applied_call_is_not_a_held_batch(wb: Workbench, server: ChatServer) -> None:
    server.enqueue(MOVE)
    assert wb.extract(progress=False).applied == 1
    (call,) = list_calls(wb.store)
    with pytest.raises(ReviewError, match=rf"^no batch {call.call_id} is held"):
        wb.accept(call.call_id)


def uac(*args: str, db: Path, user: str = "maya", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        cwd=db.parent,
        capture_output=True,
        text=True,
        env={**os.environ, "UAC_DB": str(db), "UAC_USER": user, **env},
        timeout=120,  # a hang guard only
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("uac: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr


@pytest.mark.parametrize(
    "only",
    [
        pytest.param("0", id="zero"),
        pytest.param("1,,2", id="empty-item"),
        pytest.param("1;2", id="semicolon"),
        pytest.param("\x1b[31m1", id="escape"),
        pytest.param("99999999999999999999999", id="huge"),
        pytest.param("²", id="superscript-two"),
    ],
)
def test_review_accept_only_on_the_command_line_is_one_line(
    tmp_path: Path, server: ChatServer, only: str
) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya", model=settings_for(server.base_url)) as wb:
        wb.ingest(HISTORY)
        wb.ingest([TURN])
        b = held_batch(wb, server)
        log = log_of(wb)
    err = one_line_error(uac("review", "accept", str(b), "--only", only, db=db))
    assert "\x1b" not in err
    with Workbench(db, user="maya") as wb:
        assert log_of(wb) == log


# -- the review widget's message handler --------------------------------------------------------


@pytest.fixture
def view(wb: Workbench, server: ChatServer) -> Any:
    from uac_kernel.notebook.widgets_act import ReviewView

    b = held_batch(wb, server)
    v = ReviewView(wb)
    v.batch_id = b
    return v


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("accept", id="not-a-dict"),
        pytest.param({"action": "accept"}, id="no-batch"),
        pytest.param({"action": "accept", "batch": "S"}, id="batch-a-string"),
        pytest.param({"action": "accept", "batch": 1.0}, id="batch-a-float"),
        pytest.param({"action": "accept", "batch": True}, id="batch-a-bool"),
        pytest.param({"action": "accept", "batch": "B", "only": "1,2"}, id="only-a-string"),
        pytest.param({"action": "accept", "batch": "B", "only": [1.0]}, id="only-floats"),
        pytest.param({"action": "accept", "batch": "B", "only": [True]}, id="only-bools"),
        pytest.param({"action": "accept", "batch": "B", "only": [[1]]}, id="only-nested"),
        pytest.param({"action": "ACCEPT", "batch": "B"}, id="action-case"),
        pytest.param({"action": None, "batch": "B"}, id="action-none"),
        pytest.param({"action": "accept", "batch": "B", "only": []}, id="only-empty"),
        pytest.param({"action": "accept", "batch": "B", "only": [0]}, id="only-zero"),
        pytest.param({"action": "accept", "batch": "B", "only": [5] * 100_000}, id="only-huge"),
        pytest.param({"action": "accept", "batch": 10**5000}, id="batch-past-str-digits"),
        pytest.param({"action": "reject", "batch": -1}, id="reject-negative"),
    ],
)
def test_hostile_widget_messages_change_nothing(wb: Workbench, view: Any, content: Any) -> None:
    if isinstance(content, dict) and content.get("batch") in ("B", "S"):
        batch = view.batch_id if content["batch"] == "B" else str(view.batch_id)
        content = {**content, "batch": batch}
    log, served = log_of(wb), view.served
    view._on_msg(view, content, [])
    assert view.served == served + 1
    assert view.error and "\n" not in view.error and len(view.error) < 400
    assert log_of(wb) == log and [b["id"] for b in view.batches] == [view.batch_id]


def test_a_widget_message_for_a_batch_of_another_user(tmp_path: Path, server: ChatServer) -> None:
    from uac_kernel.notebook.widgets_act import ReviewView

    path = tmp_path / "two.duckdb"
    with Workbench(path, user="alice", model=settings_for(server.base_url)) as alice:
        alice.ingest(HISTORY)
        alice.ingest([TURN])
        b = held_batch(alice, server)
    with Workbench(path, user="bob") as bob:
        bob.ingest(HISTORY)
        v = ReviewView(bob)
        log = log_of(bob)
        v._on_msg(v, {"action": "accept", "batch": b}, [])
        assert v.error.startswith(f"no batch {b} is held for review of user 'bob'")
        assert log_of(bob) == log
    with Workbench(path, user="alice") as alice:
        assert [h.id for h in alice.review()] == [b]


def test_a_widget_of_a_read_only_workbench_decides_nothing(
    tmp_path: Path, wb: Workbench, server: ChatServer
) -> None:
    from uac_kernel.notebook.widgets_act import ReviewView

    batch = held_batch(wb, server)
    path = wb.store.path
    wb.close()
    with Workbench(path, user="maya", read_only=True) as ro:
        v = ReviewView(ro)
        assert "read-only" in v.readonly and [b["id"] for b in v.batches] == [batch]
        for content in [{"action": "accept", "batch": batch}, {"action": "reject", "batch": batch}]:
            v._on_msg(v, content, [])
            assert v.error == v.readonly and v.done == ""
        assert [b["id"] for b in v.batches] == [batch]


REVIEW_SEEN = """
  const buttons = [];
  (function walk(n) {
    if (n.tagName === "BUTTON") buttons.push(n);
    n.children.forEach(walk);
  })(el);
  const note = el.find("uac-review-readonly");
  return {
    buttons: buttons.map((b) => b.textContent),
    disabled: buttons.map((b) => Boolean(b.disabled)),
    note: note.hidden ? "" : note.textContent,
  };
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_widget_buttons_wait_for_the_kernel(view: Any) -> None:
    from helpers.frontend import rendered

    def synced() -> dict[str, Any]:
        names = ["batches", "done", "readonly", "error", "served"]
        return {k: v for k, v in view.get_state().items() if k in names}

    drawn = synced()
    view._on_msg(view, {"action": "hello"}, [])  # what the module sends when it is drawn
    assert view.error == "" and view.served == drawn["served"] + 1
    (static, live), sent = rendered(view, [drawn, synced()], REVIEW_SEEN)
    assert sent == [{"action": "hello"}]
    assert static["buttons"] == ["Accept all", "Accept selected", "Reject"]
    # no answer yet (a static copy never has one): off, and saying why
    assert all(static["disabled"]) and static["note"].startswith("read-only: no kernel")
    assert not any(live["disabled"]) and live["note"] == ""
    view.readonly = "this workbench is open read-only; open it writable to decide"
    (ro,), _ = rendered(view, [{**synced(), "served": drawn["served"] + 1}], REVIEW_SEEN)
    assert all(ro["disabled"]) and ro["note"] == view.readonly


def test_a_widget_accept_with_duplicates_applies_once(wb: Workbench, view: Any) -> None:
    view._on_msg(view, {"action": "accept", "batch": view.batch_id, "only": [2, 2]}, [])
    assert view.error == "" and view.batches == []
    assert [r.key for r in wb.state.all("Flight")] == ["fl-1"]


# == ask certificates ==========================================================================


def code(expr: str) -> str:
    return json.dumps({"expression": expr, "explanation": "x"})


@pytest.fixture
def asker(tmp_path: Path, server: ChatServer) -> Iterator[Workbench]:
    with Workbench(
        tmp_path / "a.duckdb", user="maya", model=settings_for(server.base_url), rules=()
    ) as wb:
        wb.ingest(
            [
                turn("c#1", "I take warfarin."),
                {
                    **fact("2025-03-01", "add", "Medication", "m1", name="warfarin"),
                    "derived_from": ["c#1"],
                },
                *[fact("2025-03-02", "add", "Book", f"b{i:03}", title="t") for i in range(200)],
            ]
        )
        yield wb


def test_a_record_read_by_a_failed_attempt_stays_in_the_certificate(
    asker: Workbench, server: ChatServer
) -> None:
    server.enqueue(code("int(user.get(Medication, 'm1').name)"), code("'warfarin'"))
    got = asker.ask("What do I take?")
    assert got.ok and got.value == "warfarin"
    assert [r["key"] for r in got.certificate.records] == ["m1"]


def test_reading_200_decoys_first_does_not_hide_the_record_answered_from(
    asker: Workbench, server: ChatServer
) -> None:
    server.enqueue(code("[len(user.all(Book)), user.get(Medication, 'm1').name][1]"))
    got = asker.ask("What do I take?")
    assert got.value == "warfarin" and got.certificate.records_total == 201
    assert ("Medication", "m1") in {(r["type"], r["key"]) for r in got.certificate.records}


@pytest.mark.parametrize(
    ("expr", "value", "records", "said"),
    [
        pytest.param("len(search('warfarin', -5))", 0, [], [], id="search-negative-k"),
        pytest.param("len(search('warfarin', 10**12))", 1, [], ["c#1"], id="search-huge-k"),
        pytest.param(
            "[h['seq'] for h in search('warfarin', 1)] == [1]",
            True,
            [],
            ["c#1"],
            id="search-seq-compared",
        ),
        pytest.param(
            "len({(r.key, r.name) for r in user.all(Medication)})",
            1,
            ["m1"],
            ["c#1"],
            id="records-in-a-set",
        ),
        pytest.param(
            "user.get(Medication, 'm1') == user.get('Medication', 'm1')",
            True,
            ["m1"],
            ["c#1"],
            id="records-compared",
        ),
        pytest.param(
            "max(user.all(Book), key=lambda b: b.key).key",
            "b199",
            [f"b{i:03}" for i in range(200)],
            [],
            id="max-by-key",
        ),
        pytest.param("user.get(Medication, 'nope') is None", True, [], [], id="a-miss-hands-none"),
        pytest.param(
            "sorted(user.types())[1] if user.count(Medication) else 0",
            "Medication",
            [],
            [],
            id="count-and-types-hand-nothing",
        ),
    ],
)
def test_certificates_of_side_channels(
    asker: Workbench,
    server: ChatServer,
    expr: str,
    value: Any,
    records: list[str],
    said: list[str],
) -> None:
    server.enqueue(code(expr))
    got = asker.ask("q?")
    assert got.ok and got.value == value
    assert [r["key"] for r in got.certificate.records] == records
    assert [u["source"] for u in got.certificate.utterances] == said


@pytest.mark.parametrize(
    "expr",
    [
        pytest.param("[user.get(Medication, 'm1'), user.where(Medication, 'nope')]", id="query"),
        pytest.param("[user.all(Book), int(user.get(Medication, 'm1').name)]", id="value-error"),
        pytest.param("(m.name for m in user.all(Medication) if 1 / 0)", id="lazy-failure"),
        pytest.param("(f := lambda n: f(n + 1))(user.count(Book))", id="recursion"),
    ],
)
def test_an_expression_that_fails_after_reading_gives_no_certificate(
    asker: Workbench, server: ChatServer, expr: str
) -> None:
    server.enqueue(code(expr), code(expr))
    got = asker.ask("q?")
    assert not got.ok and got.certificate.records == [] and got.certificate.records_total == 0


# == SQL =======================================================================================


@pytest.fixture
def sqlwb(tmp_path: Path) -> Iterator[Workbench]:
    with Workbench(tmp_path / "s.duckdb", user="maya") as wb:
        wb.ingest([fact("2025-01-01", "add", "Trip", f"k{ESC}{BIDI}", destination=f"x{ESC}")])
        yield wb


def sql_unchanged(wb: Workbench) -> None:
    assert wb.sql("SELECT count(*) FROM Trip").rows == [(1,)]
    assert wb.sql("FROM uac_tables").rows == [("Trip", "Trip", "Trip_history")]


@pytest.mark.parametrize(
    "sql",
    [
        "INSTALL httpfs",
        "FORCE INSTALL httpfs",
        "DETACH memory",
        "VACUUM",
        "CHECKPOINT",
        "RESET memory_limit",
        "SET memory_limit = '100GB'",
        "SET GLOBAL enable_external_access = true",
        "PRAGMA enable_profiling",
        "PRAGMA memory_limit = '100GB'",
        "UPDATE Trip SET destination = 'y'",
        "TRUNCATE Trip",
        "ALTER TABLE Trip RENAME TO Gone",
        "COMMENT ON TABLE Trip IS 'x'",
        "CREATE SECRET s (TYPE S3, KEY_ID 'x', SECRET 'y')",
        "CREATE VIEW Trip2 AS SELECT 1",
        "DROP TABLE uac_tables",
        "INSERT INTO Trip (key) VALUES ('z')",
        "COPY Trip TO '/tmp/uac_atk1_copy.csv'",
        "COPY (SELECT 1) TO '/tmp/uac_atk1_copy.csv'",
        "ATTACH '/tmp/uac_atk1_attach.duckdb' AS x",
        "SELECT 1;\u2028DROP TABLE Trip",
        "FROM read_csv_auto('/etc/passwd')",
        "FROM parquet_metadata('/etc/passwd')",
        "FROM sniff_csv('/etc/passwd')",
        "FROM read_ndjson_objects('/etc/passwd')",
        "FROM glob('/etc/*')",
        "SELECT * FROM read_text('/proc/self/environ')",
        "SELECT load_extension('x')",
    ],
)
def test_statements_that_write_or_reach_out_are_refused(sqlwb: Workbench, sql: str) -> None:
    with pytest.raises(QueryError) as info:
        sqlwb.sql(sql)
    assert "\n" not in str(info.value)
    assert not Path("/tmp/uac_atk1_copy.csv").exists()
    assert not Path("/tmp/uac_atk1_attach.duckdb").exists()
    assert sqlwb.sql("SELECT current_setting('enable_external_access')").rows == [(False,)]
    sql_unchanged(sqlwb)


@pytest.mark.parametrize(
    "sql",
    [
        'SELECT * FROM "Trip"',
        "SELECT * FROM tRiP",
        "SELECT * FROM main.Trip",
        "SELECT key FROM Trip_history WHERE retracted = false",
        "SELECT * FROM duckdb_tables() WHERE table_name = 'Trip'",
        "SELECT current_setting('memory_limit')",
    ],
)
def test_reads_by_any_spelling_run(sqlwb: Workbench, sql: str) -> None:
    sqlwb.sql(sql)
    sql_unchanged(sqlwb)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM \u0422rip",  # a Cyrillic Te
        'SELECT * FROM "Trip "',
        'SELECT * FROM "Trip""; DROP TABLE Trip; --"',
    ],
)
def test_look_alike_table_names_are_a_one_line_error(sqlwb: Workbench, sql: str) -> None:
    with pytest.raises(QueryError) as info:
        sqlwb.sql(sql)
    assert "\n" not in str(info.value) and "uac_tables lists them" in str(info.value)
    sql_unchanged(sqlwb)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), -float("inf"), "5"])
def test_sql_timeouts_that_are_not_seconds(sqlwb: Workbench, timeout: Any) -> None:
    with pytest.raises(QueryError, match=r"^the SQL timeout must be a positive number, not "):
        sqlwb.sql("SELECT 1", timeout=timeout)


@pytest.mark.parametrize("timeout", [float("inf"), 1e300])
def test_a_timeout_too_large_for_a_timer(
    sqlwb: Workbench, timeout: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    died: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    try:
        sqlwb.sql("SELECT 1", timeout=timeout)
    except QueryError as exc:
        assert "\n" not in str(exc)
    time.sleep(0.2)  # the timer thread has started and died by now, if it dies
    assert died == []


def test_uac_sql_timeout_1e300(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([fact("2025-01-01", "add", "Trip", "a", n=1)])
    done = uac("sql", "--timeout", "1e300", "SELECT 1 AS one", db=db)
    assert "Traceback" not in done.stderr
    assert (done.returncode, done.stdout) == (0, "one\n1\n") or done.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["nan", "0", "-1", "inf", "soon"])
def test_uac_sql_timeout_flags_that_are_not_seconds(tmp_path: Path, value: str) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([fact("2025-01-01", "add", "Trip", "a", n=1)])
    err = one_line_error(uac("sql", f"--timeout={value}", "SELECT 1", db=db))
    assert "expected a positive number of seconds" in err


def test_a_runaway_recursive_cte_stops_at_the_limit(sqlwb: Workbench) -> None:
    runaway = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
    with pytest.raises(QueryError, match=r"SQL (time|memory) limit"):
        sqlwb.sql(runaway, timeout=1.0)
    sql_unchanged(sqlwb)


def test_uac_sql_a_huge_header_is_bounded_too(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([fact("2025-01-01", "add", "Trip", "a", n=1)])
    done = uac("sql", "SELECT 1 AS " + "x" * 120_000, db=db)  # argv holds 128 kB at most
    assert done.returncode == 0, done.stderr[-300:]
    assert len(done.stdout) <= 100_000 + 200


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT CAST(key AS INT) FROM Trip",
        "SELECT error(key) FROM Trip",
        "SELECT CAST(destination AS DATE) FROM Trip",
    ],
)
def test_stored_text_in_a_sql_error_is_escaped(tmp_path: Path, sql: str) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([fact("2025-01-01", "add", "Trip", f"k{ESC}{BIDI}", destination=f"x{ESC}")])
    err = one_line_error(uac("sql", sql, db=db))
    assert "\x1b" not in err and "\x07" not in err and "\u202e" not in err


# == what reaches a terminal ===================================================================


@pytest.fixture
def hostile_db(tmp_path: Path) -> Path:
    db = tmp_path / "h.duckdb"
    with Workbench(db, user=f"eve{ESC}") as wb:
        wb.ingest(
            [
                turn(f"s{ESC}#1", f"I said {ESC}{BIDI}\rover", speaker=f"sp{ESC}"),
                {
                    **fact("2025-03-01", "add", "Trip", f"k{ESC}{BIDI}", destination=f"d{ESC}\r"),
                    "derived_from": [f"s{ESC}#1"],
                },
                fact("2025-03-02", "update", "Trip", f"k{ESC}{BIDI}", destination=f"e{ESC}"),
            ]
        )
    return db


def clean(text: str) -> None:
    for bad in ("\x1b", "\x07", "\r", "\u202e", "\u200b"):
        assert bad not in text, (bad, text[:300])


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["log"], id="log"),
        pytest.param(["history", "Trip", f"k{ESC}{BIDI}"], id="history"),
        pytest.param(["sql", "SELECT * FROM Trip_history"], id="sql"),
        pytest.param(["sql", "--json", "SELECT * FROM Trip"], id="sql-json"),
        pytest.param(["eval", "[t.key for t in user.all(Trip)]"], id="eval"),
        pytest.param(["forget", "--text", "I said", "--dry-run"], id="forget-dry-run"),
        pytest.param(["alerts", "--json"], id="alerts-json"),
        pytest.param(["head"], id="head"),
        pytest.param(["verify"], id="verify"),
        pytest.param(["state"], id="state"),
    ],
)
def test_stored_control_characters_never_reach_the_terminal(
    hostile_db: Path, args: list[str]
) -> None:
    done = uac(*args, db=hostile_db, user=f"eve{ESC}")
    assert done.returncode == 0, done.stderr
    clean(done.stdout)
    clean(done.stderr)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["history", "Trip", "k"], id="history-unknown-key"),
        pytest.param(["log", "--kind", f"fact{ESC}"], id="log-unknown-kind"),
        pytest.param(["sql", f'SELECT "{ESC}" FROM Trip'], id="sql-unknown-column"),
        pytest.param(["eval", f"user.where('Nope{ESC}', 'n')"], id="eval-unknown-type"),
        pytest.param(["history", f"Nope{ESC}", "k"], id="history-unknown-type"),
        pytest.param(["code", "--version", "99"], id="code-unknown-version"),
    ],
)
def test_errors_that_echo_input_are_escaped(hostile_db: Path, args: list[str]) -> None:
    err = one_line_error(uac(*args, db=hostile_db, user=f"eve{ESC}"))
    clean(err)


def test_uac_users_escapes_user_ids(hostile_db: Path) -> None:
    done = uac("users", db=hostile_db, user="")
    assert done.returncode == 0
    clean(done.stdout)


def test_uac_checkpoints_escapes_the_user_id(hostile_db: Path) -> None:
    done = uac("checkpoints", db=hostile_db, user=f"eve{ESC}")
    assert done.returncode == 0
    clean(done.stdout)


def test_uac_ingest_error_on_a_hostile_line_is_escaped(tmp_path: Path) -> None:
    db = tmp_path / "i.duckdb"
    bad = tmp_path / "ev.jsonl"
    bad.write_text(json.dumps(fact("2025-01-01", "add", f"Trip{ESC}", "k", n=1)) + "\n")
    err = one_line_error(uac("ingest", str(bad), db=db))
    clean(err)
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps(turn(f"s{ESC}", f"said {ESC}")) + "\n")
    done = uac("ingest", str(ok), db=db)
    assert done.returncode == 0, done.stderr
    clean(done.stdout)


def test_uac_ingest_error_escapes_the_file_name(tmp_path: Path) -> None:
    db = tmp_path / "i.duckdb"
    bad = tmp_path / f"ev{ESC}.jsonl"
    bad.write_text("{not json\n")
    err = one_line_error(uac("ingest", str(bad), db=db))
    clean(err)


def test_uac_calls_escapes_what_it_prints(tmp_path: Path, server: ChatServer) -> None:
    db = tmp_path / "c.duckdb"
    settings = ModelSettings(model=f"m{ESC}", base_url=server.base_url, max_retries=0)
    with Workbench(db, user="maya", model=settings) as wb:
        wb.ingest(HISTORY)
        server.enqueue(code("user.count(Trip)"))
        wb.ask("how many?")
    done = uac("calls", db=db)
    assert done.returncode == 0
    clean(done.stdout)


def test_uac_ask_failure_escapes_the_models_code(tmp_path: Path, server: ChatServer) -> None:
    db = tmp_path / "q.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(HISTORY)
    evil = code(f"1 / 0 if 1 else '{ESC}\nsecond line'")
    server.enqueue(evil, evil)
    done = uac("ask", "how many?", db=db, UAC_MODEL="m", OPENAI_BASE_URL=server.base_url)
    err = one_line_error(done)
    clean(err)


def test_uac_ask_escapes_code_why_and_certificate(hostile_db: Path, server: ChatServer) -> None:
    server.enqueue(
        json.dumps(
            {
                "expression": f"[t.destination for t in user.all(Trip)] or '{ESC}'",
                "explanation": f"why {ESC}{BIDI}\r",
            }
        )
    )
    done = uac(
        "ask",
        "where?",
        db=hostile_db,
        user=f"eve{ESC}",
        UAC_MODEL="m",
        OPENAI_BASE_URL=server.base_url,
    )
    assert done.returncode == 0, done.stderr
    clean(done.stdout)


def test_uac_review_escapes_keys_values_and_reasons(tmp_path: Path, server: ChatServer) -> None:
    db = tmp_path / "r.duckdb"
    with Workbench(db, user="maya", model=settings_for(server.base_url)) as wb:
        wb.ingest(HISTORY)
        wb.ingest([turn(f"t#1{ESC}", f"Lisbon {BIDI}")])
        server.enqueue(
            answer(
                op("add", "Note", f"n{ESC}{BIDI}", cites=[f"t#1{ESC}"], text=f"v{ESC}\r"),
                op("retract", "Book", "book-a", cites=[f"t#1{ESC}"], reason=f"r{ESC}{BIDI}"),
                op("update", "Trip", "trip-lisbon", cites=[f"t#1{ESC}"], destination=f"x{ESC}"),
            )
        )
        assert wb.extract(progress=False).held == 1
    done = uac("review", db=db)
    assert done.returncode == 0, done.stderr
    clean(done.stdout)
    assert "Note 'n\\x1b]0;pwned\\x07" in done.stdout


# == what reaches a notebook ===================================================================


def test_notebook_answer_text_escapes_certificate_keys(
    hostile_db: Path, server: ChatServer
) -> None:
    from uac_kernel.render.answer import answer_lines

    server.enqueue(code("[t.key for t in user.all(Trip)]"))
    settings = settings_for(server.base_url)
    with Workbench(hostile_db, user=f"eve{ESC}", model=settings) as wb:
        got = wb.ask("keys?")
    assert got.ok and got.certificate.records
    clean("\n".join(answer_lines(got)))


def test_notebook_answer_html_escapes_everything(hostile_db: Path, server: ChatServer) -> None:
    from uac_kernel.render.answer import answer_html

    xss = "</code></pre><img src=x onerror=alert(1)><script>alert(2)</script>"
    server.enqueue(
        json.dumps(
            {"expression": f"[t.key for t in user.all(Trip)] or '{xss}'", "explanation": xss}
        )
    )
    with Workbench(hostile_db, user=f"eve{ESC}", model=settings_for(server.base_url)) as wb:
        got = wb.ask("keys?")
    page = answer_html(got)
    assert "<img" not in page and "<script" not in page and "&lt;img src=x" in page


def test_notebook_sql_table_escapes_names_and_cells(sqlwb: Workbench) -> None:
    from uac_kernel.notebook.tables import Table

    xss = "<img src=x onerror=alert(1)>"
    result = sqlwb.sql(f"SELECT key AS \"{xss}\", '{xss}' AS v, destination FROM Trip")
    table = Table(result.columns, result.rows, 10)
    page = table._repr_html_()
    assert "<img" not in page and page.count("&lt;img src=x onerror=alert(1)&gt;") == 2
    clean(table.text())
    clean(page)


def test_notebook_sql_table_html_is_bounded(sqlwb: Workbench) -> None:
    from uac_kernel.notebook.tables import Table

    def sql_table(result: Any) -> Table:
        return Table(result.columns, result.rows, 20)

    wide = ", ".join(f"repeat('x', 2000) AS c{i}" for i in range(400))
    result = sqlwb.sql(f"SELECT {wide} FROM range(20)")
    assert len(sql_table(result)._repr_html_()) < 2_000_000
    named = sqlwb.sql("SELECT 1 AS " + "n" * 1_000_000)
    assert len(sql_table(named)._repr_html_()) < 2_000_000
