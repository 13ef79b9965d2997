"""Hostile model endpoints: what a server that is not (or no longer) a chat-completions endpoint
can do to an extraction, through the real ``openai`` client.

The contract under attack (DESIGN.md "Whatever comes in is a proposal", issue 12):

1. Each hostile answer is one line of ``ModelError`` that names the call and what to do.
2. Nothing is appended to the log: its events and hashes are exactly as before.
3. The call is in the call record as failed (the answer's body kept where there was one).
4. A call has a total deadline, retries included: an endpoint that sends a byte every few
   seconds fails the call cleanly, and the command exits so the store's write lock is released.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.extraction import OPS, TURNS

from uac_kernel.core.errors import ModelError
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelSettings, list_calls
from uac_kernel.model.testing import ChatServer, Reply
from uac_kernel.workbench import Workbench

ANSWER = json.dumps({"operations": [OPS["chat-1#1"]]})
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
DEFAULT = object()  # a completion with the usual usage


def completion(usage: Any = DEFAULT, content: str = ANSWER) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "stand-in",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }
    if usage is not DEFAULT:
        body["usage"] = usage
    else:
        body["usage"] = USAGE
    return json.dumps(body)


def usage(**counts: Any) -> str:
    return completion({**USAGE, **counts})


@pytest.fixture
def server() -> Any:
    with ChatServer() as srv:
        yield srv


def open_wb(tmp_path: Path, server: ChatServer, deadline: float = 30.0) -> Workbench:
    settings = ModelSettings(
        model="stand-in", base_url=server.base_url, timeout=5.0, max_retries=0, deadline=deadline
    )
    wb = Workbench(tmp_path / "u.duckdb", user="maya", model=settings)
    wb.ingest(TURNS[:1])
    return wb


def log_of(wb: Workbench) -> list[tuple[int, str]]:
    return [(e.seq, e.hash) for e in wb.store.events()]


HTML = "<html><head><title>502 Bad Gateway</title></head><body>\x1b[31mnginx</body></html>"

HOSTILE = [
    pytest.param(
        Reply(raw_body=HTML, content_type="text/html"),
        "answered with a text/html body that is not a chat completion (it starts "
        "'<html><head><title>502 Bad Gateway</title></head><body>\\x1b[31m'…)",
        "error: not a completion",
        id="html-body",
    ),
    pytest.param(
        Reply(raw_body="", content_type="text/plain"),
        "answered with a text/plain body that is not a chat completion (it starts '')",
        "error: not a completion",
        id="empty-body",
    ),
    pytest.param(
        Reply(raw_body="[1, 2, 3]"),
        "answered with a application/json body that is not a chat completion",
        "error: not a completion",
        id="json-array-body",
    ),
    pytest.param(
        Reply(raw_body='{"object": "chat.completion", "choices": "many"}'),
        "answered with a application/json body that is not a chat completion",
        "error: not a completion",
        id="choices-not-a-list",
    ),
    pytest.param(
        Reply(raw_body=usage(prompt_tokens="many")),
        "reported usage.prompt_tokens = 'many', not a token count from 0 to 100,000,000",
        "error: bad usage",
        id="prompt-tokens-many",
    ),
    pytest.param(
        Reply(raw_body=usage(prompt_tokens=10**12)),
        "reported usage.prompt_tokens = 1000000000000, not a token count from 0 to 100,000,000",
        "error: bad usage",
        id="prompt-tokens-1e12",
    ),
    pytest.param(
        Reply(raw_body=usage(prompt_tokens=-5)),
        "reported usage.prompt_tokens = -5, not a token count",
        "error: bad usage",
        id="prompt-tokens-negative",
    ),
    pytest.param(
        Reply(raw_body=usage(prompt_tokens=1.5)),
        "reported usage.prompt_tokens = 1.5, not a token count",
        "error: bad usage",
        id="prompt-tokens-float",
    ),
    pytest.param(
        Reply(raw_body=usage(completion_tokens=True)),
        "reported usage.completion_tokens = True, not a token count",
        "error: bad usage",
        id="completion-tokens-bool",
    ),
    pytest.param(
        Reply(raw_body=usage(completion_tokens=2**63)),
        "reported usage.completion_tokens = 9223372036854775808, not a token count",
        "error: bad usage",
        id="completion-tokens-2**63",
    ),
    pytest.param(
        Reply(raw_body=completion(usage="lots")),
        "reported usage = 'lots', not a token count",
        "error: bad usage",
        id="usage-a-string",
    ),
]


@pytest.mark.parametrize(("reply", "message", "outcome"), HOSTILE)
def test_a_hostile_answer_is_one_line_and_appends_nothing(
    tmp_path: Path, server: ChatServer, reply: Reply, message: str, outcome: str
) -> None:
    wb = open_wb(tmp_path, server)
    before = log_of(wb)
    server.enqueue(reply)
    with pytest.raises(ModelError) as info:
        wb.extract(progress=False)
    text = str(info.value)
    assert "\n" not in text and "\x1b" not in text
    assert text.startswith(f"extraction call to stand-in at {server.base_url} {message}")
    assert text.endswith("; nothing was appended")
    assert log_of(wb) == before
    (call,) = list_calls(wb.store)
    assert (call.outcome, call.tokens_in, call.tokens_out) == (outcome, 0, 0)
    # the utterance is still pending: a good answer next time is applied
    server.enqueue(ANSWER)
    assert wb.extract(progress=False).applied == 1


@pytest.mark.parametrize(
    "missing",
    [
        pytest.param(None, id="usage-null"),
        pytest.param({}, id="usage-empty"),
        pytest.param({"prompt_tokens": None, "completion_tokens": None}, id="counts-null"),
    ],
)
def test_an_answer_without_token_counts_is_applied_at_zero_tokens(
    tmp_path: Path, server: ChatServer, missing: Any
) -> None:
    # Not hostile: some local servers send no usage. The answer is good; only the ledger does
    # not know its cost, so it records 0 rather than refusing the endpoint.
    wb = open_wb(tmp_path, server)
    server.enqueue(Reply(raw_body=completion(missing)))
    assert wb.extract(progress=False).applied == 1
    (call,) = list_calls(wb.store)
    assert (call.outcome, call.tokens_in, call.tokens_out) == ("ok", 0, 0)


def test_a_missing_usage_key_counts_zero(tmp_path: Path, server: ChatServer) -> None:
    wb = open_wb(tmp_path, server)
    body = json.loads(completion())
    del body["usage"]
    server.enqueue(Reply(raw_body=json.dumps(body)))
    assert wb.extract(progress=False).applied == 1
    assert [(c.outcome, c.tokens_in) for c in list_calls(wb.store)] == [("ok", 0)]


def test_a_slow_drip_fails_at_the_total_deadline(tmp_path: Path, server: ChatServer) -> None:
    # A byte every 0.3 s never trips the 5 s per-read timeout; the 1.5 s deadline ends it.
    wb = open_wb(tmp_path, server, deadline=1.5)
    before = log_of(wb)
    server.enqueue(Reply(raw_body=completion(), drip=0.3))
    with pytest.raises(ModelError) as info:
        wb.extract(progress=False)
    assert str(info.value) == (
        f"extraction call to stand-in at {server.base_url} gave no complete answer within its "
        "deadline of 1.5 s (UAC_MODEL_DEADLINE); check the endpoint, or raise the deadline for "
        "a slow model; nothing was appended"
    )
    assert log_of(wb) == before
    (call,) = list_calls(wb.store)
    assert call.outcome == "error: deadline"
    # no thread of the call is left behind to write anything
    import threading

    assert not [t for t in threading.enumerate() if t.name == "uac-model-call"]


def test_the_deadline_covers_the_retries(tmp_path: Path, server: ChatServer) -> None:
    # Each attempt times out within its 1 s read timeout and is retried; the 2 s deadline
    # ends them all, however many retries are allowed.
    settings = ModelSettings(
        model="stand-in", base_url=server.base_url, timeout=1.0, max_retries=50, deadline=2.0
    )
    wb = Workbench(tmp_path / "u.duckdb", user="maya", model=settings)
    wb.ingest(TURNS[:1])
    server.enqueue(*[Reply(content=ANSWER, delay=1.5)] * 50)
    with pytest.raises(ModelError, match="no complete answer within its deadline of 2 s"):
        wb.extract(progress=False)
    assert 1 <= len(server.requests) < 50


def test_the_deadline_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UAC_MODEL_DEADLINE", "7.5")
    assert ModelSettings.resolve(model="m").deadline == 7.5
    assert ModelSettings.resolve(model="m", deadline=3).deadline == 3
    monkeypatch.delenv("UAC_MODEL_DEADLINE")
    assert ModelSettings.resolve(model="m").deadline == 120.0


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("soon", "not a number of seconds"),
        ("0", "0"),
        ("-1", "negative"),
        ("inf", "not a number of seconds"),
        ("nan", "not a number of seconds"),
    ],
)
def test_a_bad_deadline_in_the_environment_is_one_line(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("UAC_MODEL_DEADLINE", value)
    with pytest.raises(
        ModelError,
        match=rf"^UAC_MODEL_DEADLINE='{value}' is {problem}: set it to a number of seconds > 0, "
        "at most 86400, e.g. 120, or unset it$",
    ):
        ModelSettings.resolve(model="m")


def test_the_command_exits_at_the_deadline_and_releases_the_store(tmp_path: Path) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(json.dumps(TURNS[0]) + "\n")
    db = tmp_path / "s.duckdb"
    with ChatServer() as server:
        server.enqueue(Reply(raw_body=completion(), drip=0.5))
        env = {
            **os.environ,
            "UAC_DB": str(db),
            "UAC_USER": "maya",
            "UAC_MODEL": "stand-in",
            "OPENAI_BASE_URL": server.base_url,
            "UAC_MODEL_DEADLINE": "2",
        }

        def uac(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "uac_kernel.cli.main", *args],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                env=env,
                timeout=120,  # a hang guard only
            )

        assert uac("ingest", str(turns)).returncode == 0
        done = uac("extract")
    assert done.returncode == 1
    assert done.stderr.startswith("uac: error: extraction call to stand-in at ")
    assert "within its deadline of 2 s" in done.stderr and done.stderr.count("\n") == 1
    # the lock is released: the store opens read-write, with only the utterance logged
    store = Store(db)
    assert [e.kind for e in store.events()] == ["utterance"]
    assert [c.outcome for c in list_calls(store)] == ["error: deadline"]
    store.close()
