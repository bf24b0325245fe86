"""omnigent as a library: the Python example of API.md, runnable as it stands.

    python examples/library_example.py

It registers a scripted agent (no model, no network, no key), opens a session, sends
one message and prints the events of the turn that answers it — and, if the turn
fails, why (the exit status is then 1). Pass a database URL (``sqlite:///agents.db``)
as the first argument to keep what it did; by default everything stays in memory.
"""

import sys

import trio

import omnigent

yaml_text = """
name: greeter
prompt: You are a friendly greeter.
executor:
  type: omnigent
  config:
    harness: scripted
    script:
      - say: "Hello from the library!"
"""


async def main(db: str | None) -> int:
    async with omnigent.open_runtime(db=db) as rt:  # db=None: in memory
        agent = await rt.create_agent(omnigent.AgentSpec.from_yaml(yaml_text))  # or a dict
        session = await rt.create_session(agent_id=agent.id)
        async with rt.subscribe(session.id, after=0) as events:
            await rt.send_message(session.id, "hello")  # str or content blocks
            async for event in events:  # typed events; event.to_dict() is the wire form
                if isinstance(event, omnigent.model.OutputTextDelta):
                    print(event.delta, end="", flush=True)
                elif isinstance(event, omnigent.model.OutputItemDone):
                    print()  # the streamed message is complete
                elif isinstance(event, omnigent.model.SessionStatusChanged):
                    print(f"[session.status: {event.status}]")
                    if event.status == "failed" and event.error is not None:
                        print(f"the turn failed: {event.error.message}", file=sys.stderr)
                        return 1
                    if event.status in ("idle", "cancelled"):
                        return 0
    return 1  # the stream ended without a terminal status


if __name__ == "__main__":
    sys.exit(trio.run(main, sys.argv[1] if len(sys.argv) > 1 else None))
