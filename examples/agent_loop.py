"""A plain agent loop with memlane and any OpenAI-compatible chat API.

Each run is a fresh process: it finds its session by key, asks restore() for the context that
fits the budget, calls the model, and records the turn. Stop it after any run and start it
again: the agent continues where it was.

    export OPENAI_API_KEY=...            # or a local server's key
    export OPENAI_BASE_URL=...           # optional: Ollama, vLLM, LM Studio, ...
    python examples/agent_loop.py "Plan the team offsite for 12 people"
    python examples/agent_loop.py "What did we decide about the budget?"

Needs `pip install openai` beside memlane (tests run it against a local fake server).
"""

from __future__ import annotations

import os
import sys

from openai import OpenAI

from memlane import SessionManager

MODEL = os.environ.get("MODEL", "gpt-4o-mini")
BUDGET = 2_000  # tokens of memory per turn


def main(user_text: str) -> str:
    client = OpenAI()
    db = os.environ.get("MEMLANE_DB", "agent-loop.db")
    with SessionManager(agent_id="planner", db_path=db, model=MODEL) as memory:
        session = memory.session_for("offsite", goal="Plan the team offsite")
        context = memory.restore(session.id, max_tokens=BUDGET, query=user_text)
        memory.add_message(session.id, "user", user_text)
        reply = client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": "You plan events. Your memory:\n" + context.text},
                {"role": "user", "content": user_text},
            ],
        )
        answer = reply.choices[0].message.content or ""
        memory.add_message(session.id, "assistant", answer)
        if "decide" in answer.lower() or "decision" in answer.lower():
            memory.record_decision(session.id, answer)
        return answer


if __name__ == "__main__":
    print(main(" ".join(sys.argv[1:]) or "What is next?"))
