"""A local HTTP server that speaks the chat-completions protocol, for tests and offline records.

The real ``openai`` client talks to it over HTTP, so everything between uac and the wire is the
code that runs against a hosted model. Replies come from a queue (``enqueue``) or, when the queue
is empty, from a ``responder`` function of the request body; a reply can also be a fault (an HTTP
status, a delay that outlasts the client's timeout, a body that is not JSON, a body sent a byte
at a time).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "Reply"]


@dataclass(frozen=True)
class Reply:
    """One answer of the server: assistant ``content``, or a fault."""

    content: str = ""
    status: int = 200
    delay: float = 0.0
    raw_body: str | None = None  # sent as is, e.g. to send a body that is not JSON
    content_type: str = "application/json"
    drip: float = 0.0  # seconds between the bytes of the response, each sent on its own
    retry_after: float = 0.0  # the Retry-After header of a 429, in seconds


Responder = Callable[[dict[str, Any]], "Reply | str"]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ChatServer:
    """``with ChatServer(responder) as server: OpenAI(base_url=server.base_url, api_key="x")``."""

    def __init__(self, responder: Responder | None = None):
        self.responder = responder
        self.queue: deque[Reply | str] = deque()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # shutdown() waits for the serving loop's next poll: 0.5 s by default, per server
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def enqueue(self, *replies: Reply | str) -> None:
        with self._lock:
            self.queue.extend(replies)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            queued = self.queue.popleft() if self.queue else None
        reply = queued if queued is not None else (self.responder(body) if self.responder else None)
        if reply is None:
            return Reply(status=500, raw_body='{"error": {"message": "no reply scripted"}}')
        return Reply(content=reply) if isinstance(reply, str) else reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, '{"error": {"message": "unknown path"}}')
                    return
                reply = server._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw_body is not None:
                    self._send(reply.status, reply.raw_body, reply)
                    return
                if reply.status != 200:
                    message = json.dumps(
                        {"error": {"message": f"status {reply.status}", "type": "server_error"}}
                    )
                    self._send(reply.status, message, reply)
                    return
                prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
                completion = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", ""),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": _tokens(prompt),
                        "completion_tokens": _tokens(reply.content),
                        "total_tokens": _tokens(prompt) + _tokens(reply.content),
                    },
                }
                self._send(200, json.dumps(completion), reply)

            def _send(self, status: int, text: str, reply: Reply | None = None) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header(
                    "content-type", reply.content_type if reply else "application/json"
                )
                self.send_header("content-length", str(len(data)))
                if status == 429:
                    self.send_header("retry-after", f"{reply.retry_after if reply else 0:g}")
                self.end_headers()
                # the client may have given up already (a timeout test)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    if reply is None or not reply.drip:
                        self.wfile.write(data)
                        return
                    self.wfile.flush()
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(reply.drip)

        return Handler
