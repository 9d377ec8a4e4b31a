"""A scripted OpenAI-compatible server on loopback: `GET /v1/models`, `POST /v1/chat/completions`.

Answers come from a function of the prompt; faults (an HTTP status, a malformed body, a delay) are queued
per request or chosen by the prompt, so a test states exactly what the client meets. It records every
request (path, Authorization header, body) and the most requests it had in flight at once. A request that
carries a `response_format` is answered by `structured` (a constrained decoder's answer) when given, or
refused with `refuse_format` (an HTTP status), as a server without structured outputs does.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

T = TypeVar("T")

# ("status", 429) | ("retry_after", 0) | ("malformed", None) | ("sleep", seconds) | ("body", (400, "text"))
Fault = tuple[str, Any]


@dataclass
class Script:
    answer: Callable[[str], str]
    models: tuple[str, ...] = ("scripted-model",)
    key: str | None = None  # the Bearer key required, if any
    faults: deque[list[Fault]] = field(default_factory=deque)  # popped one per chat request
    fault_for: Callable[[str], list[Fault]] | None = None  # by prompt
    delay_s: float = 0.0
    structured: Callable[[str, dict[str, Any]], str] | None = None  # (prompt, response_format) -> answer
    refuse_format: int | None = None  # the status answered to a request carrying response_format
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        _in_flight = False  # this request is counted in script.in_flight

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            # a request stops counting as in flight before its answer is written: once the client has the
            # answer it may send its next request, which must not meet this one still counted (seen under load)
            self._answered()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self) -> bool:
            if script.key is None or self.headers.get("Authorization") == f"Bearer {script.key}":
                return True
            self._send(401, b'{"error": {"message": "invalid api key"}}')
            return False

        def do_GET(self) -> None:
            with script.lock:
                script.requests.append({"path": self.path, "auth": self.headers.get("Authorization")})
            if self.path != "/v1/models":
                self._send(404, b'{"detail": "Not Found"}')
                return
            if self._authorised():
                data = {"object": "list", "data": [{"id": m, "object": "model"} for m in script.models]}
                self._send(200, json.dumps(data).encode())

        def _answered(self) -> None:
            if self._in_flight:
                self._in_flight = False
                with script.lock:
                    script.in_flight -= 1

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with script.lock:
                script.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
                faults = script.faults.popleft() if script.faults else []
            self._in_flight = True
            try:
                self._chat(body, faults)
            finally:
                self._answered()

        def _chat(self, body: dict[str, Any], faults: list[Fault]) -> None:
            if self.path != "/v1/chat/completions":
                self._send(404, b'{"detail": "Not Found"}')
                return
            if not self._authorised():
                return
            prompt = body["messages"][-1]["content"]
            if body.get("model") not in script.models:
                self._send(404, json.dumps({"error": {"message": f"model {body.get('model')} not found"}}).encode())
                return
            fmt = body.get("response_format")
            if fmt is not None and script.refuse_format is not None:
                message = {"error": {"message": "response_format json_schema is not supported", "type": "BadRequest"}}
                self._send(script.refuse_format, json.dumps(message).encode())
                return
            faults = faults + (script.fault_for(prompt) if script.fault_for else [])
            time.sleep(script.delay_s)
            headers: dict[str, str] = {}
            for kind, value in faults:
                if kind == "sleep":
                    time.sleep(value)
                elif kind == "retry_after":
                    headers["Retry-After"] = str(value)
                elif kind == "status":
                    self._send(value, b'{"error": {"message": "scripted"}}', headers)
                    return
                elif kind == "body":
                    self._send(value[0], str(value[1]).encode(), headers)
                    return
                elif kind == "malformed":
                    self._send(200, b'{"choices": [ {"message": ', headers)
                    return
            content = script.structured(prompt, fmt) if fmt is not None and script.structured else script.answer(prompt)
            data = {
                "id": "x",
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(content.split())},
            }
            self._send(200, json.dumps(data).encode())

    return Handler


@contextmanager
def serve(script: Script) -> Iterator[str]:
    """The server's base URL (http://127.0.0.1:PORT/v1) while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def settled(count: Callable[[], T], quiet_s: float = 3.0) -> T:
    """`count()` once it has not changed for `quiet_s` (after a kill, a Ray worker may still send a request
    before it sees its raylet die)."""
    counts, since = count(), time.monotonic()
    while time.monotonic() - since < quiet_s:
        time.sleep(0.1)
        if (now := count()) != counts:
            counts, since = now, time.monotonic()
    return counts
