"""The OpenAI Agents SDK peer of ``benchmarks/peers.py``: ``Runner.run_streamed``.

Run in the peers' venv: ``python sdk_stream.py MOCK_LLM_URL``. Prints ``ready``, then
for every line read on stdin runs one streamed turn of an agent on the model at
``MOCK_LLM_URL`` (Chat Completions), consuming its events in process, and prints one
JSON line: the seconds from ``run_streamed`` to the end of its events, and how many
``w0…`` words the text deltas carried.
"""

import asyncio
import json
import sys
import time

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI


async def main(url: str) -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=url, api_key="unused", timeout=300)
    model = OpenAIChatCompletionsModel(model="mock-model", openai_client=client)
    agent = Agent(name="peer", instructions="Answer.", model=model)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        started = time.perf_counter()
        result = Runner.run_streamed(agent, "go")
        words = deltas = 0
        async for event in result.stream_events():
            if event.type == "raw_response_event" and event.data.type == (
                "response.output_text.delta"
            ):
                deltas += 1
                words += event.data.delta.count("w0")
        took = time.perf_counter() - started
        print(json.dumps({"seconds": took, "words": words, "deltas": deltas}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
