"""The ``loop`` harness: model ⇄ tools until the model stops, over Chat Completions.

Each turn rebuilds the conversation from the request (system prompt, the whole
history, the new input), streams the model's answer into an assistant message (the
deltas of one network read as one ``response.output_text.delta``), runs
the tool calls it asks for through the core (policies included), feeds their outputs
back, and repeats until the model answers without calling a tool, or
``config.max_steps`` model calls have been made (then the turn fails
``StepLimitReached``). Messages that arrive mid-turn are taken between steps, so the
model sees them before its next call. A model that stops at its token limit
(``finish_reason: length``) or is filtered (``content_filter``) ends the turn with
``OutputLimitReached`` / ``ModelRefused``, keeping what it streamed: ACP clients see
``stopReason`` ``max_tokens`` / ``refusal``.

The endpoint is ``config.base_url`` or ``$OPENAI_BASE_URL``; the key ``config.api_key``
or ``$OPENAI_API_KEY`` — the latter is sent only to ``$OPENAI_BASE_URL`` (or the
default endpoint), never to a URL a spec names. 429 and 5xx answers are retried with
bounded backoff by the client; any other failure ends the turn ``failed`` with the
endpoint's message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import HarnessError, ModelRefused, OutputLimitReached, StepLimitReached
from ..model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
)
from ..observability import chat_span
from .base import HarnessEnv, TurnContext, TurnRequest
from .native import model_endpoint
from .openai import ChatCompletionsClient, Completion, TextDelta

__all__ = ["DEFAULT_BASE_URL", "LoopHarness", "chat_messages"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_INTERRUPTED = "Error: the tool call was interrupted before it returned"


def _content(message: MessageItem) -> str | list[dict[str, Any]]:
    """Chat content: a plain string when the message is all text, else parts."""
    if all(isinstance(b, InputText | OutputText) for b in message.content):
        return "".join(b.text for b in message.content if isinstance(b, InputText | OutputText))
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, InputImage):
            image: dict[str, Any] = {"url": block.image_url}
            if block.detail is not None:
                image["detail"] = block.detail
            parts.append({"type": "image_url", "image_url": image})
        else:
            parts.append({"type": "text", "text": block.text})
    return parts


def chat_messages(instructions: str, items: Iterable[Item]) -> list[dict[str, Any]]:
    """The Chat Completions ``messages`` for a prompt and a conversation.

    Tool calls join the assistant message before them; a call whose output was never
    recorded (its turn was interrupted) gets an explicit error output, since the API
    refuses a tool call without one.
    """
    items = list(items)
    answered = {i.call_id for i in items if isinstance(i, FunctionCallOutputItem)}
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    for item in items:
        if isinstance(item, MessageItem):
            messages.append({"role": item.role, "content": _content(item)})
        elif isinstance(item, FunctionCallItem):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            if item.call_id not in answered:
                messages.append(_tool_message(item.call_id, _INTERRUPTED))
        else:
            messages.append(_tool_message(item.call_id, item.output))
    return messages


def _tool_message(call_id: str, output: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": output}


def _check_finish(completion: Completion) -> None:
    """Raise for a completion the model could not finish (its partial text is kept)."""
    if completion.finish_reason == "length":
        raise OutputLimitReached("the model stopped at its output token limit")
    if completion.finish_reason == "content_filter":
        raise ModelRefused("the model's provider filtered the answer (content_filter)")


class LoopHarness:
    """The built-in agent loop; see the module docstring."""

    def __init__(self, env: HarnessEnv) -> None:
        config = env.config
        endpoint = model_endpoint(
            config.base_url,
            config.api_key,
            base_url_variable="OPENAI_BASE_URL",
            api_key_variable="OPENAI_API_KEY",
            default_base_url=DEFAULT_BASE_URL,
            provider=env.provider,
        )
        assert endpoint.base_url is not None  # the default fills it in
        self._client = ChatCompletionsClient(
            env.http, base_url=endpoint.base_url, api_key=endpoint.api_key
        )
        self._max_steps = config.max_steps
        self._temperature = config.temperature

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        if not request.model:
            raise HarnessError(
                "no model is configured: set executor.config.model in the agent spec "
                "or a model_override on the session"
            )
        messages = chat_messages(request.instructions, [*request.history, *request.input])
        tools = [t.to_openai() for t in request.tools] or None
        for _ in range(self._max_steps):
            ctx.check_budget()
            completion = await self._step(ctx, request.model, messages, tools)
            _check_finish(completion)
            assistant: dict[str, Any] = {"role": "assistant", "content": completion.text or None}
            if completion.tool_calls:
                assistant["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in completion.tool_calls
                ]
            messages.append(assistant)
            if not completion.tool_calls:
                return
            for call in completion.tool_calls:
                output = await ctx.call_tool(call.name, call.arguments, call_id=call.id)
                messages.append(_tool_message(call.id, output))
            for injected in await ctx.take_injections():
                messages.append({"role": "user", "content": _content(injected)})
        raise StepLimitReached(
            f"the model did not finish within {self._max_steps} steps "
            "(raise executor.config.max_steps if that is expected)"
        )

    async def _step(
        self,
        ctx: TurnContext,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
    ) -> Completion:
        with chat_span(model, provider="openai") as span:
            async with (
                ctx.open_message() as writer,
                self._client.open_stream(
                    model=model, messages=messages, tools=tools, temperature=self._temperature
                ) as stream,
            ):
                async for event in stream:
                    if isinstance(event, TextDelta):
                        # The deltas that arrived together are one event: a burst from a
                        # buffering gateway costs one event, not thousands.
                        await writer.write(event.text + stream.take_ready_text())
                    else:
                        if event.usage is not None:
                            ctx.record_usage(event.usage, model)
                            span.set_usage(event.usage)
                        if event.finish_reason:
                            span.set_attribute(
                                "gen_ai.response.finish_reasons", event.finish_reason
                            )
                        return event
            raise HarnessError("the model stream ended without a completion")

    async def aclose(self) -> None:
        return None
