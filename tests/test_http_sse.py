"""The pure SSE piece: frame encoding (the body is tested in test_http_sse_pull.py)."""

from __future__ import annotations

import json

from omnigent.model import OutputTextDelta
from omnigent.transports.http._sse import encode_event, encode_frame


def test_encode_event_is_one_lean_frame() -> None:
    event = OutputTextDelta(response_id="resp_1", item_id="item_1", delta="hi\nthere").stamped(
        session_id="conv_1", event_id=7, created_at=1.5
    )
    frame = encode_event(event)
    head, data = frame.split(b"data: ")
    assert head == b"id: 7\nevent: response.output_text.delta\n"
    assert data.endswith(b"\n\n") and data.count(b"\n") == 2
    assert json.loads(data) == event.to_dict()
    assert b", " not in data and b": " not in data
    assert encode_frame("error", {"a": 1}) == b'event: error\ndata: {"a":1}\n\n'
