"""A LangGraph agent whose long-term memory is memlane's `SessionStore`.

The graph has one node: it searches the store for what it knows about the user, calls an
OpenAI-compatible chat model with it, and stores what the user said as a memory. Run it twice:
the second run's answer uses what the first stored.

    export OPENAI_API_KEY=...        # and OPENAI_BASE_URL for a local server
    python examples/langgraph_agent.py "I'm vegetarian and I live in Porto."
    python examples/langgraph_agent.py "Suggest a restaurant for tonight."

Needs `pip install 'memlane[langgraph]' openai` (tests run it against a local fake server).
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from openai import OpenAI

from memlane import SessionManager
from memlane.integrations.langgraph import SessionStore

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


class State(TypedDict):
    user: str
    question: str
    answer: str


def respond(state: State, *, store: BaseStore) -> dict[str, str]:
    namespace = ("memories", state["user"])
    known = store.search(namespace, query=state["question"], limit=5)
    facts = "\n".join(f"- {item.value['text']}" for item in known) or "- nothing yet"
    reply = OpenAI().chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": f"What you know about the user:\n{facts}"},
            {"role": "user", "content": state["question"]},
        ],
    )
    store.put(namespace, str(uuid.uuid4()), {"text": state["question"]})
    return {"answer": reply.choices[0].message.content or ""}


def main(question: str) -> str:
    db = os.environ.get("MEMLANE_DB", "langgraph-agent.db")
    with SessionManager(agent_id="concierge", db_path=db) as manager:
        graph = StateGraph(State)
        graph.add_node("respond", respond)
        graph.add_edge(START, "respond")
        graph.add_edge("respond", END)
        app = graph.compile(store=SessionStore(manager))
        result = app.invoke({"user": "u1", "question": question, "answer": ""})
        return result["answer"]


if __name__ == "__main__":
    print(main(" ".join(sys.argv[1:]) or "What do you know about me?"))
