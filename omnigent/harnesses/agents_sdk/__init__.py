"""The ``openai-agents`` harness (alias ``openai-agents-sdk``): an OpenAI Agents SDK agent.

``executor.config.agent: "package.module:attr"`` names an ``agents.Agent`` the
operator allowed (its module listed like a function policy's: ``serve
--policy-module``); it runs in a child process under asyncio (:mod:`._child`), and
:class:`AgentsHarness` (:mod:`._harness`) is the runtime's side: its events become the
session's, its tool calls pass the session's policies, omnigent's tools are offered to
it. ``pip install 'omnigent[openai-agents]'``.
"""

from ._harness import AgentsHarness
from ._protocol import agent_problems, spec_problems

__all__ = ["AgentsHarness", "agent_problems", "spec_problems"]
