"""The LangGraph peer of ``benchmarks/peers.py``: one model call, streamed, no tools.

Served by ``langgraph dev`` (in memory) from ``langgraph.json``; the model is the
benchmark's ``omnigent mock-llm`` at ``$MOCK_LLM_URL`` (a Chat Completions endpoint).
"""

import os

from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph

model = ChatOpenAI(
    model="mock-model",
    base_url=os.environ["MOCK_LLM_URL"],
    api_key="unused",
    streaming=True,
    timeout=300,
)


def call_model(state: MessagesState) -> dict[str, list]:
    return {"messages": [model.invoke(state["messages"])]}


graph = StateGraph(MessagesState).add_node("agent", call_model)
graph = graph.add_edge(START, "agent").compile()
