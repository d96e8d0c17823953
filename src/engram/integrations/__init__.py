"""Engram inside the frameworks apps already use; each adapter needs its extra.

* :mod:`engram.integrations.openai_agents` (``pip install 'engram-conversation-memory[agents]'``):
  ``EngramSession``, a session of the OpenAI Agents SDK, and Engram's
  retrieval tools as SDK function tools.
* :mod:`engram.integrations.langchain` (``pip install 'engram-conversation-memory[langchain]'``):
  ``EngramChatMessageHistory``, a LangChain chat message history, and the
  retrieval tools as LangChain tools.
* :mod:`engram.integrations.langgraph` (``pip install 'engram-conversation-memory[langgraph]'``):
  ``EngramStore``, LangGraph's long-term memory store, whose items are the
  scope's Engram memories.
* :mod:`engram.integrations.adk` (``pip install 'engram-conversation-memory[adk]'``):
  ``EngramSessionService`` and ``EngramMemoryService``, Google ADK's session
  and memory services.

Adapters translate between the framework's shapes and Engram's; all the work
is done by the :class:`~engram.engine.Engram` facade and its sessions.
Nothing here is imported by ``import engram``.
"""
