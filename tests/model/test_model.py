"""Model calls through the real openai client against a local chat-completions server."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from uac_kernel.core.errors import ModelError, ModelOffline, ModelOutputInvalid
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelClient, ModelSettings, call_totals, list_calls
from uac_kernel.model.testing import ChatServer, Reply


class Answer(BaseModel):
    expression: str


ASK = [{"role": "user", "content": "How many trips?"}]


@pytest.fixture
def server() -> ChatServer:
    with ChatServer() as srv:
        yield srv  # type: ignore[misc]


def client(store: Store, server: ChatServer, **kw: object) -> ModelClient:
    settings = ModelSettings(
        model="test-model",
        base_url=server.base_url,
        timeout=kw.pop("timeout", 5.0),
        max_retries=kw.pop("max_retries", 2),
        **kw,
    )  # type: ignore[arg-type]
    return ModelClient(store, settings)


def test_structured_answer_is_recorded_and_replayed(tmp_path: Path, server: ChatServer) -> None:
    store = Store(tmp_path / "s.duckdb")
    server.enqueue('{"expression": "len(user.all(Trip))"}')
    reply = client(store, server).structured("questions", ASK, Answer, user="maya")
    assert (
        reply.value.expression == "len(user.all(Trip))" and not reply.cached and reply.tokens_in > 0
    )
    again = client(store, server).structured("questions", ASK, Answer, user="maya")
    assert again.cached and again.value == reply.value and len(server.requests) == 1
    # the request carried the answer's JSON schema (structured outputs)
    fmt = server.requests[0]["response_format"]
    assert (
        fmt["type"] == "json_schema"
        and fmt["json_schema"]["schema"]["properties"]["expression"]["type"] == "string"
    )
    (call,) = list_calls(store)
    assert (call.purpose, call.model, call.outcome, call.user) == (
        "questions",
        "test-model",
        "ok",
        "maya",
    )
    assert call_totals(store) == [("questions", 1, 0, reply.tokens_in, reply.tokens_out)]


def test_offline_mode_replays_and_fails_clearly_on_a_miss(
    tmp_path: Path, server: ChatServer
) -> None:
    store = Store(tmp_path / "s.duckdb")
    server.enqueue('{"expression": "1"}')
    client(store, server).structured("questions", ASK, Answer)
    offline = ModelClient(store, ModelSettings.resolve(model="test-model", offline=True))
    assert offline.structured("questions", ASK, Answer).value.expression == "1"
    with pytest.raises(
        ModelOffline, match="no recorded answer to this 'questions' request to model test-model"
    ):
        offline.structured("questions", [{"role": "user", "content": "something new"}], Answer)
    assert len(server.requests) == 1


def test_429_then_success(tmp_path: Path, server: ChatServer) -> None:
    server.enqueue(Reply(status=429), Reply(status=503), '{"expression": "2"}')
    reply = client(Store(tmp_path / "s.duckdb"), server).structured("questions", ASK, Answer)
    assert reply.value.expression == "2" and len(server.requests) == 3


def test_500s_until_retries_run_out(tmp_path: Path, server: ChatServer) -> None:
    store = Store(tmp_path / "s.duckdb")
    server.enqueue(*[Reply(status=500)] * 3)
    with pytest.raises(ModelError, match=r"failed.*InternalServerError.*after 2 retries"):
        client(store, server).structured("questions", ASK, Answer)
    assert len(server.requests) == 3
    assert [c.outcome for c in list_calls(store)] == ["error: InternalServerError"]


def test_timeout(tmp_path: Path, server: ChatServer) -> None:
    server.enqueue(*[Reply(content='{"expression": "3"}', delay=1.5)] * 2)
    with pytest.raises(ModelError, match="APITimeoutError"):
        client(Store(tmp_path / "s.duckdb"), server, timeout=0.5, max_retries=1).structured(
            "questions", ASK, Answer
        )


@pytest.mark.parametrize(
    ("content", "detail"),
    [("this is not json", "Invalid JSON"), ('{"expr": 1}', "expression: Field required")],
)
def test_malformed_or_schema_invalid_output(
    tmp_path: Path, server: ChatServer, content: str, detail: str
) -> None:
    store = Store(tmp_path / "s.duckdb")
    server.enqueue(content)
    with pytest.raises(ModelOutputInvalid, match=detail) as info:
        client(store, server).structured("questions", ASK, Answer)
    assert detail in info.value.detail
    assert [c.outcome for c in list_calls(store)] == ["invalid"]
    server.enqueue(
        '{"expression": "4"}'
    )  # an invalid answer is never replayed: the next call asks again
    assert client(store, server).structured("questions", ASK, Answer).value.expression == "4"


def test_settings_come_from_arguments_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UAC_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = ModelSettings.resolve()
    assert (s.model, s.base_url, s.api_key) == (
        "env-model",
        "http://localhost:8000/v1",
        "not-needed",
    )
    assert ModelSettings.resolve(model="arg-model", api_key="k").model == "arg-model"
    monkeypatch.delenv("UAC_MODEL")
    with pytest.raises(ModelError, match="set UAC_MODEL"):
        ModelSettings.resolve()
