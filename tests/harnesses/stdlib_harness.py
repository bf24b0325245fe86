"""An external harness with nothing but the standard library: no scaffold, no Trio.

It proves the protocol is what API.md says and nothing more. Behaviour by the text of
the user's message:

* ``crash``: stream a delta, write to stderr, exit with code 3 mid-turn;
* ``wait``: stream a delta, then wait for ``interrupt`` (the stream then just ends);
* ``tool NAME {json}``: ask the runtime to run tool NAME and say its output;
* ``pid``: say this process's pid; ``child``: start a grandchild and say its pid;
* ``env``: say the environment and working directory as JSON;
* ``traceparent``: say the turn request's ``traceparent`` header (``none`` without one);
* ``truncate``: stream a delta and end the stream without a terminal event;
* ``recover``: ``response.failed``, then say ``recovered`` and ``response.completed``;
* ``fail``: ``response.failed``, then end the stream;
* anything else: ``echo: <text>``, in two deltas.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
from typing import Any

TOKEN = os.environ.get("OMNIGENT_HARNESS_AUTH_TOKEN")
LOCK = threading.Lock()
RESULTS: dict[str, Any] = {}
RESULT_ARRIVED = threading.Condition(LOCK)
INTERRUPTED = threading.Event()
CHILDREN: list[subprocess.Popen[bytes]] = []


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no client address on a Unix socket
        pass

    def _authorised(self) -> bool:
        if TOKEN and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._json(401, {"error": {"code": "unauthorized", "message": "bad token"}})
            return False
        return True

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _no_content(self) -> None:
        self.send_response(204)
        self.end_headers()

    def do_GET(self) -> None:
        if self._authorised():
            self._json(200, {"status": "ok"})

    def do_POST(self) -> None:
        if not self._authorised():
            return
        length = int(self.headers.get("Content-Length", "0"))
        event = json.loads(self.rfile.read(length))
        kind = event["type"]
        if kind == "message" and "tools" in event:
            self._turn(event)
        elif kind == "tool_result":
            with RESULT_ARRIVED:
                RESULTS[event["call_id"]] = event["output"]
                RESULT_ARRIVED.notify_all()
            self._no_content()
        elif kind == "interrupt":
            INTERRUPTED.set()
            self._no_content()
        else:
            self._no_content()

    def _frame(self, frame: dict[str, Any]) -> None:
        self.wfile.write(f"event: {frame['type']}\ndata: {json.dumps(frame)}\n\n".encode())
        self.wfile.flush()

    def _say(self, *parts: str) -> None:
        for part in parts:
            self._frame({"type": "response.output_text.delta", "item_id": "m1", "delta": part})
        text = "".join(parts)
        item = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }
        self._frame({"type": "response.output_item.done", "item": item})

    def _turn(self, event: dict[str, Any]) -> None:
        INTERRUPTED.clear()
        last = event["content"][-1]
        text = "".join(b.get("text", "") for b in last["content"])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self._frame({"type": "response.created", "response": {"id": "r", "status": "in_progress"}})
        if text == "crash":
            self._say("about to crash")
            sys.stderr.write("dying on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        elif text == "wait":
            self._frame({"type": "response.output_text.delta", "item_id": "m1", "delta": "waiting"})
            INTERRUPTED.wait(30)
            return
        elif text == "truncate":
            self._frame({"type": "response.output_text.delta", "item_id": "m1", "delta": "cut"})
            return
        elif text in ("recover", "fail"):
            failed = {"id": "r", "status": "failed", "error": {"message": "a hiccup"}}
            self._frame({"type": "response.failed", "response": failed})
            if text == "fail":
                return
            self._say("recovered")
        elif text.startswith("tool "):
            _, name, args = text.split(" ", 2)
            call = {
                "type": "function_call",
                "call_id": "c1",
                "name": name,
                "arguments": args,
                "status": "action_required",
            }
            self._frame({"type": "response.output_item.done", "item": call})
            with RESULT_ARRIVED:
                RESULT_ARRIVED.wait_for(lambda: "c1" in RESULTS, timeout=30)
                output = RESULTS.pop("c1", "no result")
            self._say(f"tool said: {output}")
        elif text == "pid":
            self._say(str(os.getpid()))
        elif text == "traceparent":
            self._say(self.headers.get("traceparent") or "none")
        elif text == "child":
            child = subprocess.Popen(["sleep", "300"])
            CHILDREN.append(child)
            self._say(str(child.pid))
        elif text == "env":
            self._say(
                json.dumps(
                    {
                        "env": dict(os.environ),
                        "cwd": os.getcwd(),
                        "model": event.get("model"),
                        "tools": [t["name"] for t in event["tools"]],
                    }
                )
            )
        else:
            self._say("echo: ", text)
        self._frame({"type": "response.completed", "response": {"id": "r", "status": "completed"}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--conversation-id", required=True)
    args = parser.parse_args()
    with Server(args.socket, Handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
