"""OpenAI Agents SDK agents for the ``openai-agents`` harness tests.

Imported only in the harness's child process (``tests.harnesses.sdk_agents:assistant``),
never by the test process itself: the SDK is asyncio's.
"""

from __future__ import annotations

from pathlib import Path

from agents import Agent, function_tool


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool(needs_approval=True)
def write_note(name: str, text: str) -> str:
    """Write a note file in the working directory."""
    Path(name).write_text(text)
    return f"wrote {name}"


@function_tool
def count_words(text: str) -> int:
    """How many words a text has."""
    print("counting words")  # goes to stderr, never onto the wire
    return len(text.split())


spanish = Agent(name="spanish", instructions="Answer in Spanish.", tools=[count_words])
assistant = Agent(
    name="assistant",
    instructions="You are a helpful assistant.",
    tools=[get_weather, write_note],
    handoffs=[spanish],
)
not_an_agent = "just a string"
