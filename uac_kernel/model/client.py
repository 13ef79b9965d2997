"""Model access through the ``openai`` client, with every call recorded in the store.

Any OpenAI-compatible endpoint works (``base_url``): hosted, vLLM, llama.cpp, Ollama. Answers are
structured outputs constrained by a pydantic model's JSON schema. Every call — request, response,
model, tokens in and out, latency, outcome — is appended to ``model_calls``; an identical request
is answered from that record, so runs replay offline, and offline mode never touches the network.

An endpoint is not trusted either: a call has a total deadline (retries included), and a body
that is not a chat completion, or reports token counts that are not counts, is a one-line
``ModelError`` recorded as a failed call.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from uac_kernel.core import settings
from uac_kernel.core.display import plural, shorten
from uac_kernel.core.errors import ModelError, ModelOffline, ModelOutputInvalid
from uac_kernel.core.settings import redacted
from uac_kernel.log.store import Store

__all__ = [
    "Budget",
    "CallSummary",
    "ModelClient",
    "ModelReply",
    "ModelSettings",
    "call_totals",
    "list_calls",
    "recorded_model",
]

T = TypeVar("T", bound=BaseModel)

PLACEHOLDER_KEY = "not-needed"  # local servers (vLLM, llama.cpp, Ollama) accept any key

DEFAULT_DEADLINE = 120.0
"""Seconds one call may take in all, retries included (``timeout`` is per read): long enough for
a slow local model to write a batch's answer, short enough that a stalled endpoint releases the
store's write lock within two minutes."""
# Far above any model's context (a few million tokens), and within model_calls' INTEGER columns.
MAX_TOKENS = 100_000_000

# How each setting of ``ModelSettings.resolve`` is given, as a face spells it: its Python
# arguments by default; the command passes its flags, so its messages name those.
PYTHON_ARGUMENTS = {"model": "model=...", "base_url": "base_url=...", "offline": "offline=True"}


@dataclass(frozen=True)
class ModelSettings:
    """Where and how to call the model. Arguments win over the environment."""

    model: str
    base_url: str | None = None
    api_key: str = PLACEHOLDER_KEY
    timeout: float = 60.0
    max_retries: int = 3
    offline: bool = False
    deadline: float = DEFAULT_DEADLINE

    @classmethod
    def resolve(
        cls,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        offline: bool | None = None,
        deadline: float | None = None,
        spelled: Mapping[str, str] = PYTHON_ARGUMENTS,
    ) -> ModelSettings:
        """Arguments, then ``UAC_MODEL`` / ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``UAC_OFFLINE``
        / ``UAC_MODEL_DEADLINE`` (seconds a call may take in all).

        ``spelled`` says how the caller's face gives ``model``, ``base_url`` and ``offline``
        (``{"model": "--model NAME", ...}`` for the command), for the message when none is set.
        """
        off = offline if offline is not None else settings.OFFLINE.get()
        name = model or settings.MODEL.get() or ""
        if not name and not off:
            raise ModelError(
                f"no model configured: pass {spelled['model']} or set UAC_MODEL (and "
                f"{spelled['base_url']} or OPENAI_BASE_URL for a local server); or pass "
                f"{spelled['offline']} or set UAC_OFFLINE=1 to answer only from recorded calls"
            )
        # an argument is checked as the variable it stands for is: one check for both
        url = settings.OPENAI_BASE_URL
        given = spelled["base_url"].split()[0].rstrip(".=")
        limit = settings.MODEL_DEADLINE
        return cls(
            model=name,
            base_url=url.check(base_url, given) if base_url else url.get(),
            api_key=api_key or settings.OPENAI_API_KEY.get() or PLACEHOLDER_KEY,
            timeout=limit.check(timeout, "timeout") if timeout is not None else 60.0,
            max_retries=max_retries if max_retries is not None else 3,
            offline=off,
            deadline=limit.check(deadline, "deadline")
            if deadline is not None
            else limit.get(DEFAULT_DEADLINE),
        )


@dataclass(frozen=True)
class ModelReply(Generic[T]):
    """A structured answer, and where it came from."""

    value: T
    call_id: int
    cached: bool
    tokens_in: int
    tokens_out: int
    key: str = ""
    purpose: str = ""


def request_key(model: str, messages: Sequence[dict[str, Any]], schema: type[BaseModel]) -> str:
    """Identifies a request: the same model, messages and answer schema give the same key."""
    body = {"model": model, "messages": list(messages), "schema": schema.model_json_schema()}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


class Budget(Protocol):
    """Model calls in flight (and per second) shared by many processes: ``uac fleet run``'s
    ``--concurrency`` and ``--rate``. ``acquire`` blocks until a call may be sent."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class ModelClient:
    """Structured calls to one model, recorded in (and replayed from) one store.

    With a ``budget``, every HTTP request — each retry after a 429 or a 5xx too — takes it
    first and gives it back once the response is read.
    """

    def __init__(self, store: Store, settings: ModelSettings, budget: Budget | None = None):
        self.store = store
        self.settings = settings
        self.budget = budget

    def structured(
        self,
        purpose: str,
        messages: Sequence[dict[str, Any]],
        schema: type[T],
        *,
        user: str = "",
    ) -> ModelReply[T]:
        """Ask for an answer of type ``schema``; served from the record when asked before."""
        key = request_key(self.settings.model, messages, schema)
        recorded = self._recorded(key)
        # A rejected answer is asked for again when online; offline it is replayed, so the run
        # repeats exactly what happened when it was recorded (rejection, retry and all).
        if recorded is not None and (recorded[4] == "ok" or self.settings.offline):
            call_id, content, tokens_in, tokens_out, _ = recorded
            value = schema.model_validate_json(content)
            return ModelReply(value, call_id, True, tokens_in, tokens_out, key, purpose)
        if self.settings.offline:
            model = self.settings.model
            raise ModelOffline(
                f"offline, and no recorded answer to this {purpose!r} request "
                f"{f'to model {model}' if model else 'with no model named'}; turn offline mode "
                "off and configure an endpoint to make the call"
            )
        return self._call(purpose, key, list(messages), schema, user)

    def _call(
        self, purpose: str, key: str, messages: list[dict[str, Any]], schema: type[T], user: str
    ) -> ModelReply[T]:
        import openai  # about 0.3 s to import: only a call that reaches the network does

        started = time.perf_counter()
        request = {"model": self.settings.model, "messages": messages, "schema": schema.__name__}
        url = self.settings.base_url
        where = f"{purpose} call to {self.settings.model} at {redacted(url) if url else 'the OpenAI API'}"

        def fail(
            outcome: str, error: str, message: str, body: dict[str, Any] | None = None
        ) -> ModelError:
            latency = time.perf_counter() - started
            self._record(user, purpose, key, request, body, 0, 0, latency, outcome, error)
            return ModelError(f"{where} {message}; nothing was appended")

        try:
            raw = self._send(messages, schema)
        except TimeoutError as exc:
            seconds = f"{self.settings.deadline:g}"
            raise fail(
                "error: deadline",
                f"no complete answer within {seconds} s",
                f"gave no complete answer within its deadline of {seconds} s (UAC_MODEL_DEADLINE)"
                "; check the endpoint, or raise the deadline for a slow model",
            ) from exc
        except openai.APIError as exc:
            raise fail(
                f"error: {type(exc).__name__}",
                str(exc),
                f"failed ({type(exc).__name__}: {_one_line(exc)}) after "
                f"{plural(self.settings.max_retries, 'retry', 'retries')}; "
                "check the endpoint and try again",
            ) from exc
        latency = time.perf_counter() - started
        body = _completion_body(raw.http_response)
        if body is None:
            response = raw.http_response
            kind = response.headers.get("content-type", "no content type").split(";")[0]
            text = " ".join(response.text.split())
            start = repr(text[:60]) + ("…" if len(text) > 60 else "")
            raise fail(
                "error: not a completion",
                f"{kind} body: {response.text[:200]}",
                f"answered with a {kind} body that is not a chat completion (it starts {start})"
                "; check that the base URL is an OpenAI-compatible endpoint ending in /v1",
            )
        try:
            tokens_in, tokens_out = _usage(body)
        except ValueError as exc:
            raise fail(
                "error: bad usage",
                str(exc),
                f"reported {exc}, not a token count from 0 to {MAX_TOKENS:,}; the endpoint "
                "is not answering as an OpenAI-compatible server",
                body,
            ) from None
        try:
            completion = raw.parse()
            parsed = completion.choices[0].message.parsed
            if parsed is None:
                raise ValueError("the answer was empty or refused")
        except (
            ValidationError,
            ValueError,
            IndexError,
            AttributeError,
            TypeError,
            # the answer was cut at the token limit, or withheld by the endpoint's filter
            openai.LengthFinishReasonError,
            openai.ContentFilterFinishReasonError,
        ) as exc:
            detail = _validation_detail(exc)
            self._record(
                user, purpose, key, request, body, tokens_in, tokens_out, latency, "invalid", detail
            )
            raise ModelOutputInvalid(
                f"{purpose}: the model's answer does not fit {schema.__name__}: {detail}",
                detail=detail,
            ) from exc
        call_id = self._record(
            user, purpose, key, request, body, tokens_in, tokens_out, latency, "ok", ""
        )
        return ModelReply(parsed, call_id, False, tokens_in, tokens_out, key, purpose)

    def _send(self, messages: list[dict[str, Any]], schema: type[T]) -> Any:
        """The raw response to one call, or ``TimeoutError`` once ``settings.deadline`` passes.

        httpx bounds each read, not a whole response (encode/httpx#1450): an endpoint that
        sends a byte every few seconds never trips the read timeout. So the call runs on the
        async client under ``asyncio.wait_for``, which cancels it — retries and all — at the
        deadline and closes its connection. It runs on a thread of its own with its own event
        loop (a notebook's thread already runs one), which has ended when this returns: no
        call outlives its deadline, and only this thread writes the call record.
        """
        import openai

        settings = self.settings
        budget = self.budget

        async def call() -> Any:
            # The client retries 429s, 5xx, timeouts and dropped connections with backoff.
            async with openai.AsyncOpenAI(
                api_key=settings.api_key,
                base_url=settings.base_url,
                timeout=settings.timeout,
                max_retries=settings.max_retries,
                # An answer comes from the endpoint named, or the call fails: a redirect to
                # another host would apply that host's answer under this one's name.
                http_client=openai.DefaultAsyncHttpxClient(
                    follow_redirects=False,
                    **({"transport": _budgeted(budget)} if budget is not None else {}),
                ),
            ) as client:
                return await asyncio.wait_for(
                    client.chat.completions.with_raw_response.parse(
                        model=settings.model,
                        messages=messages,  # type: ignore[arg-type]
                        response_format=schema,
                    ),
                    settings.deadline,
                )

        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(asyncio.run(call()))
            except BaseException as exc:  # handed to the caller's thread as it is
                outcome.append(exc)

        worker = threading.Thread(target=run, name="uac-model-call", daemon=True)
        worker.start()
        worker.join()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def reject(self, reply: ModelReply[Any], reason: str, *, user: str = "") -> None:
        """Record that a well-formed answer failed uac's own checks, so it is not reused online."""
        if self.settings.offline:
            return
        request = {"rejects_call": reply.call_id}
        body = {"choices": [{"message": {"content": reply.value.model_dump_json()}}]}
        self._record(user, reply.purpose, reply.key, request, body, 0, 0, 0.0, "rejected", reason)

    def _recorded(self, key: str) -> tuple[int, str, int, int, str] | None:
        row = self.store.con.execute(
            "SELECT call_id, content, tokens_in, tokens_out, outcome FROM model_calls "
            "WHERE request_key = ? AND salt <> '' AND outcome IN ('ok', 'rejected') "
            "ORDER BY call_id DESC LIMIT 1",
            [key],
        ).fetchone()
        if row is None:
            return None
        return int(row[0]), str(row[1]), int(row[2]), int(row[3]), str(row[4])

    def _record(
        self,
        user: str,
        purpose: str,
        key: str,
        request: dict[str, Any],
        body: dict[str, Any] | None,
        tokens_in: int,
        tokens_out: int,
        latency: float,
        outcome: str,
        error: str,
    ) -> int:
        content = ""
        if body:
            choices = body.get("choices") or [{}]
            content = str(((choices[0] or {}).get("message") or {}).get("content") or "")
        call_id = self.store.record_call(
            user=user,
            purpose=purpose,
            model=self.settings.model,
            base_url=redacted(self.settings.base_url or ""),  # no password in the record
            request_key=key,
            request=orjson.dumps(request).decode(),
            response=orjson.dumps(body).decode() if body is not None else "",
            content=content,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_ms=round(latency * 1000, 1),
            outcome=outcome,
            error=error[:2000],
        )
        return call_id


def _budgeted(budget: Budget) -> Any:
    """An HTTP transport that sends each request within ``budget``.

    The transport comes from the HTTP library the openai client is built on (httpx, or httpx2
    in openai 3), so it is found through the client class rather than imported by name.
    """
    import importlib

    import openai

    base = openai.DefaultAsyncHttpxClient.__mro__[1]
    http = importlib.import_module(base.__module__.partition(".")[0])

    class BudgetedTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        def __init__(self) -> None:
            self.inner = http.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            await _take(budget)
            try:
                response = await self.inner.handle_async_request(request)
                await response.aread()  # the call is in flight until its body is in
                return response
            finally:
                budget.release()

        async def aclose(self) -> None:
            await self.inner.aclose()

    return BudgetedTransport()


async def _take(budget: Budget) -> None:
    """``budget.acquire()`` without blocking the event loop. Cancelled while it waits (the
    call's deadline), the share it then gets is given back at once, so none is lost."""
    lock = threading.Lock()
    state = {"held": False, "abandoned": False}

    def acquire() -> None:
        budget.acquire()
        with lock:
            if state["abandoned"]:
                budget.release()
            else:
                state["held"] = True

    try:
        await asyncio.to_thread(acquire)
    except asyncio.CancelledError:
        with lock:
            state["abandoned"] = True
            if state["held"]:
                budget.release()
        raise


def _completion_body(response: Any) -> dict[str, Any] | None:
    """The JSON body of a chat completion, or ``None`` if the body is not one."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return None
    return body


def _usage(body: dict[str, Any]) -> tuple[int, int]:
    """Tokens in and out as the body reports them; ``ValueError`` naming a count that is not one.

    A body without ``usage`` (some local servers send none) counts as 0 tokens: the answer is
    still good, only the ledger does not know its cost.
    """
    usage = body.get("usage")
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        raise ValueError(f"usage = {shorten(repr(usage), 40)}")
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        n = usage.get(name, 0)
        if n is None:
            n = 0
        if type(n) is not int or not 0 <= n <= MAX_TOKENS:
            raise ValueError(f"usage.{name} = {shorten(repr(n), 40)}")
        counts.append(n)
    return counts[0], counts[1]


def _validation_detail(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        errors = exc.errors()[:3]
        parts = [f"{'.'.join(map(str, e['loc'])) or '(answer)'}: {e['msg']}" for e in errors]
        return "; ".join(parts)
    return _one_line(exc)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


@dataclass(frozen=True)
class CallSummary:
    call_id: int
    created_at: datetime
    user: str
    purpose: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    outcome: str


def list_calls(store: Store, user: str | None = None, limit: int = 50) -> list[CallSummary]:
    """The most recent calls, newest last."""
    where, params = ("WHERE user_id = ?", [user]) if user else ("", [])
    rows = store.con.execute(
        "SELECT call_id, created_at, user_id, purpose, model, tokens_in, tokens_out, latency_ms, "
        f"outcome FROM model_calls {where} ORDER BY call_id DESC LIMIT {int(limit)}",
        params,
    ).fetchall()
    return [CallSummary(*r) for r in reversed(rows)]


def call_totals(store: Store, user: str | None = None) -> list[tuple[str, int, int, int, int]]:
    """Per purpose: calls made, calls that failed, tokens in, tokens out — the cost ledger.

    An answer uac rejected counts once, as the call that was made (it is not a failed call).
    """
    where, params = ("WHERE user_id = ?", [user]) if user else ("", [])
    rows = store.con.execute(
        "SELECT purpose, count(*) FILTER (WHERE outcome <> 'rejected'), "
        "count(*) FILTER (WHERE outcome NOT IN ('ok', 'rejected')), "
        f"sum(tokens_in), sum(tokens_out) FROM model_calls {where} GROUP BY purpose ORDER BY purpose",
        params,
    ).fetchall()
    return [(str(p), int(n), int(f), int(i or 0), int(o or 0)) for p, n, f, i, o in rows]


def recorded_model(store: Store, user: str | None = None) -> str | None:
    """The model of the most recent recorded answer — of ``user`` if they have one, else of
    any user — or ``None`` if the store has none: offline replay uses it when no model is named.
    """
    row = store.con.execute(
        "SELECT model FROM model_calls WHERE outcome IN ('ok', 'rejected') AND model <> '' "
        "ORDER BY (user_id = ?) DESC, call_id DESC LIMIT 1",
        [user or ""],
    ).fetchone()
    return str(row[0]) if row else None
