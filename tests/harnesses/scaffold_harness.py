"""A test harness written with omnigent's scaffold. Behaviour by the message text:

* ``tool NAME {json}``: the runtime runs the tool; say its output;
* ``ask``: ask the person; say the answer;
* ``policy NAME``: ask the runtime's policies about a call of NAME; say the verdict;
* ``inject``: wait for a message sent mid-turn; say it;
* ``sleep``: wait until interrupted;
* ``fail``: raise (the turn fails with the message);
* ``many N``: stream N deltas;
* anything else: ``echo: <text>``.
"""

from __future__ import annotations

import json

import trio

from omnigent.harnesses.scaffold import HarnessTurn, TurnFailed, run


async def turn(t: HarnessTurn) -> None:
    text = t.text
    if text.startswith("tool "):
        _, name, args = text.split(" ", 2)
        await t.say("tool said: " + await t.call_tool(name, json.loads(args)))
    elif text == "ask":
        action, content = await t.elicit(
            "May I?", requested_schema={"type": "object", "properties": {}}
        )
        await t.say(f"answer: {action} {json.dumps(content)}")
    elif text.startswith("policy "):
        verdict = await t.evaluate_policy(
            {
                "type": "PHASE_TOOL_CALL",
                "data": {"tool_name": text.split(" ", 1)[1], "tool_input": {}},
            }
        )
        await t.say("verdict: " + verdict["action"])
    elif text == "inject":
        items = await t.next_injection()
        said = "".join(b["text"] for item in items for b in item["content"])
        await t.say(f"injected: {said}")
    elif text == "sleep":
        async with t.message() as stream:
            await stream.write("sleeping")
            await trio.sleep_forever()
    elif text == "fail":
        raise TurnFailed("the harness gave up")
    elif text.startswith("many "):
        async with t.message() as stream:
            for i in range(int(text.split(" ")[1])):
                await stream.write(f"w{i} ")
    else:
        await t.say(f"echo: {text}")


if __name__ == "__main__":
    run(turn)
