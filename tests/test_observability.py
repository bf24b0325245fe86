"""Usage and cost, budgets, metrics, log lines and traces (issue 30; docs/observability.md).

Usage sums and budget refusals are exact: MockLLM counts 4 characters a token and
reports what it counted (``MockLLM.usages``). Traces go to an OTLP HTTP receiver in the
test (a thread serving loopback, decoding with ``opentelemetry-proto``).
"""

from __future__ import annotations

import http.server
import json
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

import omnigent
from omnigent.client import OmnigentClient
from omnigent.model import (
    FunctionCallOutputItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseCompleted,
    ResponseFailed,
    Usage,
)
from omnigent.observability import REQUESTS_LOGGER, TURNS_LOGGER, JsonFormatter, open_tracing
from omnigent.testing import MockLLM, mock_tokens, run_turn, scripted_agent

from .external_helpers import HARNESSES, external
from .http_helpers import open_server
from .reliability.serve_rig import Watch, stop, summary, terminal_count, write_agents
from .runners.rig import open_runners, start_server

MCP_SERVER = HARNESSES / "mcp_server.py"
PROMPT = "You are terse."
SECRET_PROMPT = "the launch code is 0000-PROMPT-SECRET"
KEY = "sk-test-SECRET-KEY-0123456789"


def loop_spec(name: str = "looper", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "prompt": PROMPT,
        "executor": {
            "config": {
                "harness": "loop",
                "model": "mock-model",
                "base_url": "http://mock/v1",
                "api_key": KEY,
            }
        },
        **extra,
    }


@pytest.fixture
def mock() -> MockLLM:
    return MockLLM()


@pytest.fixture
async def rt(mock: MockLLM, tmp_path: Path) -> AsyncIterator[omnigent.Runtime]:
    (tmp_path / "config.yaml").write_text(
        "prices:\n  mock-model: {input_per_mtok: 1.5, output_per_mtok: 4}\n"
    )
    async with (
        httpx.AsyncClient(transport=mock.transport()) as http,
        omnigent.open_runtime(http_client=http, home=tmp_path, workspace=tmp_path) as runtime,
    ):
        yield runtime


def cost(prompt: int, completion: int) -> float:
    return (prompt * 1.5 + completion * 4) / 1e6


def terminal(events: list[Any]) -> Any:
    return next(e for e in events if isinstance(e, ResponseCompleted | ResponseFailed))


# -- usage and cost ------------------------------------------------------------------


async def test_a_turns_usage_is_summed_priced_and_kept_per_session_and_tree(
    mock: MockLLM, rt: omnigent.Runtime
) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    rt.register_tool(add)
    mock.reply_tool_call("add", {"a": 1, "b": 2})
    mock.reply_text("It is 3.")
    mock.reply_text("child answer")
    with trio.fail_after(20):
        agent = await rt.create_agent(loop_spec())
        parent = (await rt.create_session(agent.id)).id
        events = await run_turn(rt, parent, "1 + 2?")
        child = (await rt.create_session(agent.id, parent_session_id=parent)).id
        await run_turn(rt, child, "hello")
    (p1, c1), (p2, c2), (p3, c3) = mock.usages
    turn = terminal(events).response.usage
    assert turn == Usage(
        input_tokens=p1 + p2,
        output_tokens=c1 + c2,
        total_tokens=p1 + p2 + c1 + c2,
        model_calls=2,
        context_tokens=p2 + c2,
        cost_usd=pytest.approx(cost(p1, c1) + cost(p2, c2)),
    )
    # The second call re-sent the first's conversation: what the rule counts on.
    assert p2 >= p1 + c1
    assert p1 == mock_tokens(PROMPT) + mock_tokens("1 + 2?")
    snapshot = await rt.get_session(parent)
    assert snapshot.usage == turn
    child_usage = (await rt.get_session(child)).usage
    assert child_usage.total_tokens == p3 + c3
    tree = snapshot.tree_usage
    assert (tree.input_tokens, tree.output_tokens) == (p1 + p2 + p3, c1 + c2 + c3)
    assert tree.cost_usd == pytest.approx(cost(p1, c1) + cost(p2, c2) + cost(p3, c3))
    wire = snapshot.to_dict()
    assert wire["usage"]["total_tokens"] == p1 + p2 + c1 + c2
    assert wire["tree_usage"]["model_calls"] == 3


async def test_the_budget_ends_a_turn_before_the_call_that_would_cross_it(
    mock: MockLLM, rt: omnigent.Runtime
) -> None:
    def noop() -> str:
        """Do nothing."""
        return "done"

    rt.register_tool(noop)
    first = mock_tokens(PROMPT) + mock_tokens("go") + mock_tokens("{}")
    # After the first call the next one reads at least what the first did: with
    # spent + context = 2 * first, a limit of 2 * first leaves no room for it.
    mock.reply_tool_call("noop", {})
    mock.reply_text("never asked for")
    with trio.fail_after(20):
        agent = await rt.create_agent(loop_spec(limits={"max_tokens": 2 * first}))
        session = (await rt.create_session(agent.id)).id
        events = await run_turn(rt, session, "go")
    assert mock.usages == [(mock_tokens(PROMPT) + mock_tokens("go"), mock_tokens("{}"))]
    assert len(mock.requests) == 1  # the second call was never made
    failed = terminal(events)
    assert isinstance(failed, ResponseFailed)
    assert failed.error.code == "budget_exceeded"
    assert failed.response.usage is not None
    assert failed.response.usage.total_tokens == first
    assert (await rt.get_session(session)).status == "failed"


async def test_a_session_at_its_limit_makes_no_call(mock: MockLLM, rt: omnigent.Runtime) -> None:
    answer = "ok"
    used = mock_tokens(PROMPT) + mock_tokens("one") + mock_tokens(answer)
    mock.reply_text(answer)
    with trio.fail_after(20):
        agent = await rt.create_agent(loop_spec(limits={"max_tokens": used}))
        session = (await rt.create_session(agent.id)).id
        assert isinstance(terminal(await run_turn(rt, session, "one")), ResponseCompleted)
        refused = terminal(await run_turn(rt, session, "two"))
    assert isinstance(refused, ResponseFailed)
    assert refused.error.code == "budget_exceeded"
    assert refused.response.usage is None  # no call was made
    assert len(mock.requests) == 1


async def test_a_cost_budget_counts_priced_calls(mock: MockLLM, rt: omnigent.Runtime) -> None:
    mock.reply_text("ok")
    with trio.fail_after(20):
        prompt = mock_tokens(PROMPT) + mock_tokens("one")
        limit = cost(prompt, mock_tokens("ok"))
        agent = await rt.create_agent(loop_spec(limits={"max_cost_usd": limit}))
        session = (await rt.create_session(agent.id)).id
        await run_turn(rt, session, "one")
        refused = terminal(await run_turn(rt, session, "two"))
    assert refused.error.code == "budget_exceeded"
    assert "max_cost_usd" in refused.error.message


def test_limits_and_prices_are_checked() -> None:
    with pytest.raises(omnigent.SpecError, match=r"limits\.max_tokens"):
        omnigent.AgentSpec.from_dict({"name": "a", "limits": {"max_tokens": 0}})
    with pytest.raises(omnigent.SpecError, match=r"limits\.bogus"):
        omnigent.AgentSpec.from_dict({"name": "a", "limits": {"bogus": 1}})
    from omnigent.providers import parse_provider_config

    with pytest.raises(omnigent.ConfigError, match=r"prices\.m\.output_per_mtok"):
        parse_provider_config({"prices": {"m": {"input_per_mtok": 1}}})


# -- metrics and log lines over HTTP ---------------------------------------------------


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def captured_logs() -> Iterator[Records]:
    handler = Records()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


async def test_metrics_move_and_log_lines_hold_no_secret(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.reply_tool_call("sys_os_read", {"path": "missing.txt"})
    mock.reply_text("no such file")
    spec = loop_spec()
    with captured_logs() as logs, trio.fail_after(30):
        async with mock.serve() as base_url:
            spec["executor"]["config"]["base_url"] = base_url
            # The mock model is on loopback: the operator allows its URL for clients.
            trusted = {"workspace": tmp_path, "home": tmp_path, "allowed_model_urls": [base_url]}
            async with open_server(runtime_options=trusted) as s:
                before = samples((await s.client.get("/metrics")).text)
                agent = (await s.client.post("/v1/agents", json=spec)).json()
                created = await s.client.post("/v1/sessions", json={"agent_id": agent["id"]})
                sid = created.json()["id"]
                body = {"type": "message", "data": {"content": [SECRET_PROMPT]}}
                body["data"]["content"] = [{"type": "input_text", "text": SECRET_PROMPT}]
                streamed = await s.client.post(f"/v1/sessions/{sid}/events?stream=true", json=body)
                assert "response.completed" in streamed.text
                answer = await s.client.get("/metrics")
                assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
                after = samples(answer.text)
    assert (
        before.get(("omnigent_turns_total", (("harness", "loop"), ("status", "completed")))) is None
    )
    assert after[("omnigent_turns_total", (("harness", "loop"), ("status", "completed")))] == 1
    assert (
        after[("omnigent_tool_calls_total", (("outcome", "error"), ("tool", "sys_os_read")))] == 1
    )
    (p1, _), (p2, _) = mock.usages
    tokens = ("omnigent_tokens_total", (("kind", "input"), ("model", "mock-model")))
    assert after[tokens] == p1 + p2
    assert (
        after[("omnigent_events_written_total", ())] > before[("omnigent_events_written_total", ())]
    )
    assert after[("omnigent_turn_duration_seconds_count", (("harness", "loop"),))] == 1
    assert after[("omnigent_store_write_seconds_count", ())] >= 1
    assert ("omnigent_active_sessions", ()) in after
    # One line per request, one per turn; none holds the key or the prompt.
    requests = [r for r in logs.records if r.name == REQUESTS_LOGGER]
    posted = [r for r in requests if r.fields["path"] == f"/v1/sessions/{sid}/events"]  # type: ignore[attr-defined]
    assert len(posted) == 1
    assert posted[0].fields["status"] == 200  # type: ignore[attr-defined]
    assert posted[0].fields["session_id"] == sid  # type: ignore[attr-defined]
    turns = [r for r in logs.records if r.name == TURNS_LOGGER]
    assert len(turns) == 1
    assert turns[0].fields["status"] == "completed"  # type: ignore[attr-defined]
    assert turns[0].fields["input_tokens"] == p1 + p2  # type: ignore[attr-defined]
    formatter = JsonFormatter()
    for record in logs.records:
        if record.levelno >= logging.INFO:
            line = formatter.format(record)
            json.loads(line)
            assert KEY not in line and "SECRET" not in line, line


async def test_metrics_need_the_apis_identity() -> None:
    with trio.fail_after(10):
        async with open_server(auth="header") as s:
            assert (await s.client.get("/metrics")).status_code == 401
            ok = await s.client.get("/metrics", headers={"X-Forwarded-Email": "a@example.com"})
            assert ok.status_code == 200


async def test_a_json_refusal_counts_as_an_error(rt: omnigent.Runtime) -> None:
    """Regression: the session and agent tools refuse as JSON objects (the original's
    ``{"error": …}``), which the tool-call counter took for ``ok``."""
    steps = [{"call": "sys_session_get_info", "args": {"session_id": "conv_nope"}}]
    agent = await rt.create_agent(scripted_agent("asker", steps))
    session = await rt.create_session(agent.id)
    with trio.fail_after(10):
        await run_turn(rt, session.id)
    text = rt.metrics.exposition({}).decode()
    counted = {
        (s.labels["tool"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "omnigent_tool_calls"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert counted == {("sys_session_get_info", "error"): 1}


def test_client_named_labels_are_bounded() -> None:
    """Regression (the third attack probe): model and tool names come from clients and
    runners, and each new one made new series for ever. Past the bound they count as
    ``other``, and the counts stay right."""
    from omnigent.observability import Metrics
    from omnigent.observability._metrics import MAX_LABEL_VALUES

    metrics = Metrics()
    for index in range(MAX_LABEL_VALUES + 50):
        metrics.usage_recorded(f"model-{index}", Usage(input_tokens=1, output_tokens=1))
        metrics.tool_called(f"mcp__x__tool{index}", "ok")
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition({}).decode())}
    tokens = [s for s in families["omnigent_tokens"].samples if s.name.endswith("_total")]
    models = {s.labels["model"] for s in tokens}
    assert len(models) == MAX_LABEL_VALUES + 1 and "other" in models
    assert sum(s.value for s in tokens) == 2 * (MAX_LABEL_VALUES + 50)
    other_input = [s.value for s in tokens if s.labels == {"kind": "input", "model": "other"}]
    assert other_input == [50]
    calls = [s for s in families["omnigent_tool_calls"].samples if s.name.endswith("_total")]
    assert len({s.labels["tool"] for s in calls}) == MAX_LABEL_VALUES + 1


def test_json_log_lines(capsys: pytest.CaptureFixture[str]) -> None:
    from omnigent.observability import configure_logging, log_fields

    with configure_logging(1, "json"):
        logging.getLogger("omnigent.test").info("hello %s", "x", extra=log_fields(n=1))
        logging.getLogger("omnigent.test").debug("not shown")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["message"] == "hello x" and record["n"] == 1 and record["level"] == "INFO"


# -- traces ----------------------------------------------------------------------------


class _Receiver(http.server.BaseHTTPRequestHandler):
    spans: list[Any]

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.server.spans.extend(scope.spans)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, list[Any]]]:
    """An OTLP HTTP receiver on loopback (in a thread: the exporter flushes from ours)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.spans = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", server.spans  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def settled_child(rt: omnigent.Runtime, parent: str) -> Any:
    """The parent's one child, once its turn has ended (polled: no event says so here)."""
    while True:
        page = await rt.list_sessions(parent_session_id=parent, limit=10)
        if page.data and page.data[0].status == "idle" and page.data[0].last_event_id > 0:
            return page.data[0]
        await trio.sleep(0.01)


def attrs_of(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


async def test_the_span_tree_of_a_turn_with_a_tool_call_and_a_sub_agent(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.reply_tool_call("sys_session_send", {"agent": "helper", "title": "t", "args": "hi"})
    for _ in range(3):
        mock.reply_text("done")
    spec = loop_spec(
        sub_agents=[
            {
                "name": "helper",
                "executor": {"config": {"harness": "scripted", "script": [{"say": "hello"}]}},
            }
        ],
        tools={"agents": ["helper"]},
    )
    with otlp_receiver() as (endpoint, spans):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "omnigent-test"}
        with open_tracing(env) as on:
            assert on
            async with (
                httpx.AsyncClient(transport=mock.transport()) as http,
                omnigent.open_runtime(http_client=http, home=tmp_path, workspace=tmp_path) as rt,
            ):
                with trio.fail_after(30):
                    agent = await rt.create_agent(spec)
                    parent = (await rt.create_session(agent.id)).id
                    await run_turn(rt, parent, "delegate")
                    child = await settled_child(rt, parent)
        # Leaving open_tracing flushed every span to the receiver.
    by_id = {bytes(s.span_id): s for s in spans}
    names = [s.name for s in spans]
    parent_turn = next(s for s in spans if s.name == "invoke_agent looper")
    assert attrs_of(parent_turn)["gen_ai.conversation.id"] == parent
    assert attrs_of(parent_turn)["gen_ai.usage.input_tokens"] > 0
    chats = [s for s in spans if s.name == "chat mock-model"]
    assert chats and bytes(chats[0].parent_span_id) == bytes(parent_turn.span_id)
    tool = next(s for s in spans if s.name == "execute_tool sys_session_send")
    assert bytes(tool.parent_span_id) == bytes(parent_turn.span_id)
    assert attrs_of(tool)["gen_ai.tool.call.id"].startswith("call_mock")
    helper = next(s for s in spans if s.name == "invoke_agent helper")
    assert bytes(helper.parent_span_id) == bytes(tool.span_id), names
    assert bytes(helper.trace_id) == bytes(parent_turn.trace_id)
    assert attrs_of(helper)["gen_ai.conversation.id"] == child.id
    assert all(bytes(s.parent_span_id) in by_id or not s.parent_span_id for s in spans)


def test_without_tracing_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    program = """
import sys, trio, omnigent
from omnigent.testing import run_turn, scripted_agent

async def main():
    async with omnigent.open_runtime(home=sys.argv[1], workspace=sys.argv[1]) as rt:
        agent = await rt.create_agent(scripted_agent("bot", [{"say": "hi"}]))
        session = await rt.create_session(agent.id)
        await run_turn(rt, session.id, "hello")

trio.run(main)
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
print("clean")
"""
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "clean"


async def test_a_turn_on_a_runner_is_traced_under_the_servers_turn(tmp_path: Path) -> None:
    """Across the runner link, a ``loop`` turn on a real runner: its ``chat`` spans (made
    on the runner) are children of the server's ``invoke_agent`` (``turn/run`` carries
    ``trace``), and so is the server's ``execute_tool`` of the tool call the runner's
    harness made (served inside the turn's context)."""
    mock = MockLLM()
    mock.reply_tool_call("sys_os_shell", {"command": "echo traced"})
    mock.reply_text("done remotely")
    server_root = tmp_path / "server"
    with otlp_receiver() as (endpoint, spans):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "omnigent-test"}
        async with mock.serve() as base_url:
            # The runner's own environment names the endpoint (a runner refuses a spec's
            # base_url its operator did not allow).
            spec = {"name": "remote", "executor": {"config": {"harness": "loop"}}}
            spec["executor"]["config"]["model"] = "mock-model"
            write_agents(server_root, [spec])
            on_runner = {**env, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": KEY}
            with trio.fail_after(60):
                served = await start_server(server_root, "--allow-model-url", base_url, env=env)
                try:
                    async with open_runners() as runners, OmnigentClient(served.url) as client:
                        runner = await runners.start(
                            tmp_path / "laptop", served.url, "laptop", env=on_runner
                        )
                        session = await client.create_session(
                            agent_name="remote", runner_id="laptop"
                        )
                        async with trio.open_nursery() as nursery:
                            watch = Watch(client, session.id)
                            await nursery.start(watch.run)
                            await client.send_message(session.id, "go")
                            await watch.wait_for(
                                lambda events: terminal_count(events) >= 1, "the turn's end"
                            )
                            nursery.cancel_scope.cancel()
                        await runner.stop()  # it flushes its spans as it exits
                finally:
                    await stop(served)  # so does the server
    assert isinstance(terminal(watch.events), ResponseCompleted), summary(watch.events)
    turn = next(s for s in spans if s.name == "invoke_agent remote")
    assert attrs_of(turn)["gen_ai.conversation.id"] == session.id
    chats = [s for s in spans if s.name == "chat mock-model"]
    assert len(chats) == 2  # both made on the runner, under the server's turn
    for chat in chats:
        assert bytes(chat.trace_id) == bytes(turn.trace_id)
        assert bytes(chat.parent_span_id) == bytes(turn.span_id)
    tool = next(s for s in spans if s.name == "execute_tool sys_os_shell")
    assert bytes(tool.trace_id) == bytes(turn.trace_id)
    assert bytes(tool.parent_span_id) == bytes(turn.span_id)


async def test_an_external_harness_gets_its_turns_span_as_traceparent(tmp_path: Path) -> None:
    """Across the external harness link: the turn's request carries W3C ``traceparent``
    naming the turn's ``invoke_agent`` span, so the harness's own spans continue it."""
    with otlp_receiver() as (endpoint, spans):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "omnigent-test"}
        with open_tracing(env) as on:
            assert on
            async with omnigent.open_runtime(home=tmp_path, workspace=tmp_path) as rt:
                with trio.fail_after(30):
                    agent = await rt.create_agent(external("ext"))
                    session = (await rt.create_session(agent.id)).id
                    events = await run_turn(rt, session, "traceparent")
        untraced = await _external_turn_untraced(tmp_path)
    said = "".join(e.delta for e in events if isinstance(e, OutputTextDelta))
    version, trace_id, span_id, _flags = said.split("-")
    turn = next(s for s in spans if s.name == "invoke_agent ext")
    assert (version, trace_id, span_id) == ("00", turn.trace_id.hex(), turn.span_id.hex())
    assert untraced == "none"  # tracing off: no header at all


async def _external_turn_untraced(tmp_path: Path) -> str:
    async with omnigent.open_runtime(home=tmp_path, workspace=tmp_path) as rt:
        with trio.fail_after(30):
            agent = await rt.create_agent(external("ext2"))
            session = (await rt.create_session(agent.id)).id
            events = await run_turn(rt, session, "traceparent")
    return "".join(e.delta for e in events if isinstance(e, OutputTextDelta))


async def test_an_mcp_tool_call_carries_its_span_in_meta(tmp_path: Path) -> None:
    """Across MCP: a ``tools/call`` carries ``_meta.traceparent`` naming the
    ``execute_tool`` span of the call, so the server's spans continue it."""
    script = [{"call": "mcp__calc__trace", "args": {}}, {"call": "mcp__calc__trace", "args": {}}]
    spec = {
        **scripted_agent("tracer", script),
        "mcp_servers": [{"name": "calc", "command": [sys.executable, str(MCP_SERVER)]}],
    }
    with otlp_receiver() as (endpoint, spans):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "omnigent-test"}
        async with omnigent.open_runtime(home=tmp_path, workspace=tmp_path) as rt:
            with trio.fail_after(60):
                agent = await rt.create_agent(spec)
                session = (await rt.create_session(agent.id)).id
                with open_tracing(env) as on:
                    assert on
                    traced = await run_turn(rt, session, "go")
                untraced = await run_turn(rt, session, "again")
    said = [
        e.item.output
        for e in traced
        if isinstance(e, OutputItemDone) and isinstance(e.item, FunctionCallOutputItem)
    ]
    tools = [s for s in spans if s.name == "execute_tool mcp__calc__trace"]
    assert len(said) == len(tools) == 2
    for output, tool in zip(said, sorted(tools, key=lambda s: s.start_time_unix_nano), strict=True):
        version, trace_id, span_id, _flags = output.split("-")
        assert (version, trace_id, span_id) == ("00", tool.trace_id.hex(), tool.span_id.hex())
    assert [
        e.item.output
        for e in untraced
        if isinstance(e, OutputItemDone) and isinstance(e.item, FunctionCallOutputItem)
    ] == ["-", "-"]  # tracing off: nothing in _meta
