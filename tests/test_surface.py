"""The library's surface: curated exports, the runtime's states, records-only mode."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import trio

import omnigent
import omnigent.core
import omnigent.errors
import omnigent.harnesses
import omnigent.model
import omnigent.providers
import omnigent.stores
from omnigent.model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputText,
    MessageItem,
    OutputText,
    item_from_dict,
    unstructure,
)
from omnigent.testing import RecordingHarness, collect_turn, scripted_agent

MODULES = [
    omnigent,
    omnigent.core,
    omnigent.errors,
    omnigent.harnesses,
    omnigent.model,
    omnigent.providers,
    omnigent.stores,
]


def _isort_key(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions (isort's order for ``__all__``)."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_is_sorted_and_is_exactly_what_users_get(module: types.ModuleType) -> None:
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert all(hasattr(module, name) for name in exported)
    # Every public omnigent name the package puts in its namespace is exported.
    ours = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and (getattr(value, "__module__", None) or "").startswith("omnigent")
    }
    assert ours <= set(exported)


def test_types_public_methods_take_and_return_are_exported() -> None:
    for name in ("Verdict", "PolicyEvent", "Resolution", "Grant", "ElicitationInfo"):
        assert name in omnigent.__all__
    assert issubclass(omnigent.Unauthorized, omnigent.OmnigentError)
    assert omnigent.Unauthorized.status == 401


def test_only_open_runtime_makes_a_runtime() -> None:
    with pytest.raises(TypeError, match="open_runtime"):
        omnigent.Runtime()


async def test_a_closed_runtime_refuses_every_call() -> None:
    async with omnigent.open_runtime() as rt:
        assert rt.state is omnigent.RuntimeState.OPEN
        agent = await rt.create_agent(scripted_agent())
        session = await rt.create_session(agent.id)
    assert rt.state is omnigent.RuntimeState.CLOSED
    calls = [
        rt.get_session(session.id),
        rt.list_sessions(),
        rt.create_agent(scripted_agent("other")),
        rt.send_message(session.id, "late"),
        rt.list_items(session.id),
    ]
    for call in calls:
        with pytest.raises(omnigent.RuntimeClosed):
            await call
    with pytest.raises(omnigent.RuntimeClosed):
        async with rt.subscribe(session.id):
            pass


async def test_a_released_subscription_cannot_be_iterated_again(rt: omnigent.Runtime) -> None:
    """Regression: iterating it after its block silently registered it again."""
    agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
    session = (await rt.create_session(agent.id)).id
    async with rt.subscribe(session, after=0) as events:
        await rt.send_message(session, "go")
        await collect_turn(events)
    with pytest.raises(trio.ClosedResourceError):
        await events.__anext__()


@pytest.mark.parametrize(
    "item",
    [
        MessageItem(role="user", content=(InputText("hi"),)),
        MessageItem(role="assistant", content=(OutputText("yo"),), status="incomplete"),
        FunctionCallItem(call_id="call_1", name="sys_os_read", arguments="{}"),
        FunctionCallOutputItem(call_id="call_1", output="ok"),
    ],
)
def test_items_round_trip_like_events(item: omnigent.Item) -> None:
    """Regression: ``unstructure(item)`` dropped the ``type`` tag."""
    wire = item.to_dict()
    assert wire["type"] == item.type
    assert item_from_dict(wire) == item
    assert unstructure(item) == wire


async def test_a_records_only_runtime_reads_but_never_publishes_or_deletes(
    tmp_path: Path,
) -> None:
    """Regression: beside an owner it published events (colliding with the owner's
    ids) and deleted rows."""
    db = str(tmp_path / "shared.db")
    recorder = RecordingHarness()
    with trio.fail_after(10):
        async with omnigent.open_runtime(db=db) as owner:
            owner.register_harness("recorder", recorder.factory)
            spec = scripted_agent(harness="recorder")
            spec["policies"] = [{"name": "ask", "type": "ask_tools", "tools": ["x"]}]
            agent = await owner.create_agent(spec)
            session = (await owner.create_session(agent.id)).id
            await owner.send_message(session, "go")
            async with owner.subscribe(session, after=0) as events:
                await collect_turn(events)
            before = await owner.last_event_id(session)
            async with omnigent.open_runtime(db=db, exclusive=False) as beside:
                assert beside.records_only
                assert (await beside.get_session(session)).id == session
                assert (await beside.list_items(session)).data
                params = omnigent.core.elicitation_params("ok?", "tool_call")
                refused = [
                    beside.create_session(agent.id, parent_session_id=session),
                    beside.elicit(session, params),
                    beside.evaluate_policy(
                        session,
                        {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "x", "tool_input": {}}},
                    ),
                    beside.delete_session(session),
                    beside.send_message(session, "hi"),
                    beside.interrupt(session),
                    beside.stop_session(session),
                    beside.hold_elicitation(session, params),
                ]
                for call in refused:
                    with pytest.raises(omnigent.StoreBusy, match=r"records only \(owned by pid"):
                        await call
                # Records are fine: a new top-level session and an agent.
                await beside.create_session(agent.id)
            assert await owner.last_event_id(session) == before
            assert (await owner.get_session(session)).id == session
            assert owner.statistics()["elicitations"] == 0


def _imports(path: Path) -> list[str]:
    """The absolute module names ``path`` imports (relative ones resolved)."""
    import ast

    package = ".".join(path.with_suffix("").relative_to(ROOT.parent).parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.parent.relative_to(ROOT.parent).parts)
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append(name)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


ROOT = Path(omnigent.__file__).parent
# Which private modules a package may reach into: its own, and these exceptions.
_LAYERS = {"omnigent.core": "core", "omnigent.model": "model", "omnigent.stores": "stores"}


@pytest.mark.parametrize("layer", sorted(_LAYERS))
def test_no_module_reaches_into_another_layers_private_modules(layer: str) -> None:
    """The layers show in the imports: outside ``omnigent.core`` nothing imports
    ``omnigent.core._x`` (likewise model and stores, whose concrete SQLite store is its
    own business)."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        inside = path.is_relative_to(ROOT / _LAYERS[layer])
        # The spec's cattrs hooks are registered on the model's one converter.
        inside = inside or (layer == "omnigent.model" and path.is_relative_to(ROOT / "spec"))
        for name in _imports(path):
            private = name.startswith(f"{layer}._") or (
                layer == "omnigent.stores" and name == "omnigent.stores.sqlite"
            )
            if private and not inside:
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []
