"""Reading conversation files into batches of messages, validated before anything is stored.

Three formats are understood:

* **jsonl**: one OpenAI chat message per line, ``{"role", "content"}`` plus
  optional ``name``, ``tool_calls``, ``tool_call_id``, ``created_at`` (ISO 8601
  or Unix seconds), ``session`` (or ``session_id``) and ``metadata``. Blank lines
  are skipped; other keys (``id``, ``scope``, ``tokens`` from Engram's own
  exports) are ignored. A line without a session goes to the default session.
* **document**: Engram's own session documents (``engram export --format
  json``, a jsondir file, or an agent-runtime context file), read by
  :mod:`engram.transfer.documents`.
* **chatgpt**: the ``conversations.json`` file of a ChatGPT data export: a list
  of conversations whose ``mapping`` is a tree of nodes. Only the main branch is
  read (the ``parent`` chain from ``current_node`` back to the root); hidden and
  empty nodes are skipped. A tool invocation (an assistant node addressed to a
  tool) and the tool's answer become an assistant ``tool_calls`` message and a
  ``tool`` message, so the pair stays valid OpenAI input.

Parsing is all-or-nothing: :func:`read_import` returns every batch or raises
:class:`~engram.errors.ImportFormatError` naming the file and line (or
conversation) at fault, so the caller can validate the whole file before it
writes a single row. Timestamps without a zone are read as UTC.

Checks made on every message: a known role; string content (a list of text
parts is joined; an assistant message with ``tool_calls`` may have none); no NUL
character and no lone surrogate anywhere (neither can be stored faithfully);
a readable timestamp; well-formed ``tool_calls``; and every ``tool`` message
answers a call made earlier in the same session of the same file.
"""

from engram.transfer.importers.chatgpt import parse_chatgpt
from engram.transfer.importers.common import (
    EXPECTED,
    FORMATS,
    IMPORT_KEY,
    MAX_FILE_BYTES,
    Format,
    ImportBatch,
    import_key,
    parse_timestamp,
)
from engram.transfer.importers.finetune import parse_finetune
from engram.transfer.importers.jsonl import parse_jsonl
from engram.transfer.importers.reader import detect_format, read_documents, read_import

__all__ = [
    "EXPECTED",
    "FORMATS",
    "IMPORT_KEY",
    "MAX_FILE_BYTES",
    "Format",
    "ImportBatch",
    "detect_format",
    "import_key",
    "parse_chatgpt",
    "parse_finetune",
    "parse_jsonl",
    "parse_timestamp",
    "read_documents",
    "read_import",
]
