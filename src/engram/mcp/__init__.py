"""Engram as an MCP server: the retrieval and memory tools for any MCP client.

::

    engram mcp --db sqlite:///engram.db --scope phoenix        # stdio

Over HTTP the same server is mounted at ``/mcp`` in ``engram serve``, behind
the API keys (see :mod:`engram.mcp.http`). Needs the ``mcp`` extra
(``pip install 'engram-conversation-memory[mcp]'``); importing this package without it raises
:class:`~engram.errors.MissingDependency`.
"""

from __future__ import annotations

from engram.errors import MissingDependency

try:
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependency.extra("the MCP server", "mcp", exc) from exc

from engram.mcp.server import Binding, build_server, serve_stdio

__all__ = ["Binding", "build_server", "serve_stdio"]
