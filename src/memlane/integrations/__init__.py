"""Adapters for the frameworks agents are built with, each in its own module and extra.

==================================  ==============================  ===========================
module                              what it gives                   install
==================================  ==============================  ===========================
``integrations.langgraph``          ``SessionStore`` (BaseStore)    ``[langgraph]``
``integrations.langchain``          middleware, retriever, history  ``[langchain]``
``integrations.openai_agents``      ``AgentSession``, filter        ``[openai-agents]``
``integrations.mcp``                ``memlane mcp``: a stdio server     ``[mcp]``
``integrations.llamaindex``         memory block, chat store        ``[llamaindex]``
``integrations.autogen``            ``SessionMemory`` (Memory)      ``[autogen]``
==================================  ==============================  ===========================

Nothing here is imported by ``import memlane``: each module imports its framework
when it is imported itself, and says which extra to install when that fails.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import a framework's module, or fail with the install line that brings it.

    >>> require("json", "none").__name__
    'json'
    """
    try:
        return import_module(module)
    except ImportError as exc:
        from ..errors import InvalidInput

        raise InvalidInput(
            f"This adapter needs {module!r}: pip install 'memlane[{extra}]'."
        ) from exc
