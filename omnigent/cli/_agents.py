"""``omnigent agents add | list | show``.

``add`` registers a spec file of the operator's in the store (a records-only runtime,
beside a server that may hold it — an agent is a record, not work). ``list`` and
``show`` read the store, or the server that holds it (:mod:`omnigent.cli._records`);
``--json`` prints what ``GET /v1/agents`` and ``GET /v1/agents/{id}`` answer.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import trio
import yaml

from .._config import default_db_url
from ..core import open_runtime
from ..spec import redact_secrets
from ._parser import add_db_option
from ._records import open_records
from ._render import format_agent, format_agents
from ._specs import OperatorSpec

__all__ = ["add_json_option", "add_server_option", "declare_agents", "print_json"]


def add_server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        metavar="URL",
        help="ask the omnigent server at URL (default: the one holding the store, if any)",
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print JSON (the HTTP API's shapes), for scripts"
    )


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def declare_agents(agents: argparse.ArgumentParser) -> None:
    commands = agents.add_subparsers(metavar="COMMAND", required=True)
    add = commands.add_parser("add", help="register an agent (a new version if the name exists)")
    add.add_argument("path", metavar="PATH", help="agent spec file")
    add_db_option(add)
    add.set_defaults(handler=_cmd_add)
    listing = commands.add_parser("list", help="list agents (latest versions)")
    add_json_option(listing)
    add_server_option(listing)
    listing.set_defaults(handler=_cmd_list)
    show = commands.add_parser("show", help="an agent and its spec (secrets redacted)")
    show.add_argument("agent", metavar="AGENT", help="the agent's name or id")
    show.add_argument("--version", type=int, metavar="N", help="that version (default: latest)")
    add_json_option(show)
    add_server_option(show)
    show.set_defaults(handler=_cmd_show)


def _cmd_add(args: argparse.Namespace) -> int:
    operator = OperatorSpec.read(args.path)

    async def add() -> dict[str, Any]:
        # Records only, beside a server that may hold the store.
        options = operator.runtime_options()
        db = getattr(args, "db", None) or default_db_url()
        async with open_runtime(db=db, exclusive=False, **options) as rt:
            return (await rt.create_agent(operator.spec)).to_dict()

    agent = trio.run(add, restrict_keyboard_interrupt_to_checkpoints=True)
    print(format_agent(agent))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    async def read() -> list[dict[str, Any]]:
        async with open_records(getattr(args, "db", None), args.server) as records:
            return await records.list_agents()

    agents = trio.run(read, restrict_keyboard_interrupt_to_checkpoints=True)
    if args.json:
        print_json({"object": "list", "data": agents})
    else:
        for line in format_agents(agents):
            print(line)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    async def read() -> tuple[dict[str, Any], dict[str, Any]]:
        async with open_records(getattr(args, "db", None), args.server) as records:
            agent = await records.find_agent(args.agent)
            spec = await records.agent_spec(agent["id"], args.version)
            return agent, redact_secrets(spec)

    agent, spec = trio.run(read, restrict_keyboard_interrupt_to_checkpoints=True)
    if args.json:
        print_json({**agent, "spec": spec})
        return 0
    print(
        f"{agent['id']}  {agent['name']}  v{args.version or agent['version']}  "
        f"{agent['harness']}  {agent.get('model') or '-'}"
    )
    if agent.get("description"):
        print(agent["description"])
    print(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True).rstrip())
    return 0
