"""An external harness written with omnigent's scaffold.

Run by the runtime as ``python echo_harness.py --socket PATH
--conversation-id ID`` (see ``external-echo.yaml``). Each turn echoes the user's
message; a message starting with ``run `` asks the runtime to run the tool named after
it (``run sys_session_share`` says why this agent may not share), through the agent's policies;
``ask`` asks the person behind the session first.
"""

from __future__ import annotations

from omnigent.harnesses.scaffold import HarnessTurn, run


async def turn(t: HarnessTurn) -> None:
    text = t.text.strip()
    if text.startswith("run "):
        output = await t.call_tool(text.removeprefix("run ").strip(), {})
        await t.say(output)
    elif text == "ask":
        action, _ = await t.elicit("May I go on?")
        await t.say(f"you answered {action}")
    else:
        await t.say(f"echo: {text}")


if __name__ == "__main__":
    run(turn)
