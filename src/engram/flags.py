"""Text that reads like instructions to a model, flagged wherever recalled text goes back to one.

A stored message is data. When it comes back (a search hit, a page of history,
a memory, the text a summary is written from) it must never pass for an
instruction. :func:`flags` names what in a text reads like one:

* ``role_marker``: chat-template tokens (``<|im_start|>``, ``[INST]``,
  ``<<SYS>>``, ``<start_of_turn>``...), or a line that opens with a role label
  (``system:``, ``assistant:``, ``### Instruction:``) and then addresses the
  model;
* ``override``: "ignore / disregard / forget (all) previous instructions",
  "you are now ...", "from now on you ...", "reveal your system prompt", "new
  instructions:", "developer mode", in English and a few other languages;
* ``tool_call``: JSON or markup shaped like a tool call (``"tool_calls":``,
  ``"function_call":``, an object with ``"name"`` and ``"arguments"``,
  ``<tool_call>``, ``<function_calls>``, ``<invoke name=``);
* ``hidden_tags``: Unicode tag characters (U+E0000-U+E007F), invisible text
  a model still reads;
* ``invisible``: zero-width characters inside Latin words, runs of them, and
  bidirectional overrides (U+202D, U+202E). Zero-width joiners in emoji and
  non-joiners in Persian or Indic words are ordinary writing and are not flagged.

Ordinary chat that mentions a system, code with JSON, and text in any
language are not flagged; ``benchmarks/flagging.py`` measures both error rates
on a written corpus. Pure, deterministic; a text without any of the trigger
characters or words costs one regular-expression scan.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable

ROLE_MARKER = "role_marker"
OVERRIDE = "override"
TOOL_CALL = "tool_call"
HIDDEN_TAGS = "hidden_tags"
INVISIBLE = "invisible"
#: Every flag, in the order :func:`flags` reports them.
FLAGS = (ROLE_MARKER, OVERRIDE, TOOL_CALL, HIDDEN_TAGS, INVISIBLE)


def _word(first: str, rest: str) -> re.Pattern[str]:
    """``first`` as a whole word, then ``rest``: a literal-led pattern the engine finds fast.

    Patterns run on the lower-cased text, without IGNORECASE: a pattern that opens with a
    literal is searched for that literal first, so a 1 MiB message costs milliseconds.
    """
    literal = re.escape(first)
    return re.compile(f"{literal}(?<!\\w{literal}){rest}", re.DOTALL)


_QUANT = (
    r"(?:(?:all|any|every|each|the|your|these|those|of|everything|that|was|said|told|you)\s+){0,3}"
)
_WHEN = r"(?:(?:previous|prior|above|earlier|preceding|former|original|initial|existing|system|"
_WHEN += r"safety|developer|old)\s+){0,2}"
_RULES = (
    r"(?:instructions?|prompts?|directions?|directives?|rules|guidelines|guardrails|constraints|"
    r"programming|restrictions|system\s+message)\b"
)
_SHOWN = (
    r"\s+(?:me\s+)?(?:all\s+)?(?:of\s+)?(?:your|the)\s+(?:hidden\s+|secret\s+|full\s+|"
    r"original\s+|initial\s+)?(?:system\s+prompt|system\s+message|instructions|prompt)\b"
)
_MODES = r"\s+mode\s+(?:is\s+)?(?:enabled|activated)\b"
#: What reads like an order to drop the rules, leak them or switch persona.
_OVERRIDES: tuple[re.Pattern[str], ...] = (
    _word("forget", r"\s+everything\s+(?:you\s+(?:were|have\s+been)\s+told|above|before)\b"),
    *(
        _word(verb, r"\s+(?!my\b)" + _QUANT + _WHEN + _RULES)
        for verb in (
            "ignore",
            "disregard",
            "forget",
            "override",
            "bypass",
            "skip",
            "drop",
            "abandon",
        )
    ),
    _word(
        "you",
        r"\s+are\s+now\s+(?:a|an|the|in|my|no\s+longer|free|unrestricted|dan|jailbroken)\b",
    ),
    _word(
        "from",
        r"\s+now\s+on,?\s+(?:you|the\s+assistant|always|never|respond|reply|answer|ignore)\b",
    ),
    *(
        _word(verb, _SHOWN)
        for verb in ("reveal", "print", "show", "repeat", "output", "leak", "dump", "display")
    ),
    _word("new", r"\s+(?:system\s+)?instructions?\s*:"),
    *(_word(name, _MODES) for name in ("developer", "god", "sudo", "admin", "dan")),
    _word("enter", r"\s+(?:developer|god|sudo|admin|dan)\s+mode\b"),
    _word("do", r"\s+anything\s+now\b"),
    _word("jailbr", r"(?:eak|oken)\s+(?:mode|prompt|yourself)\b"),
    *(
        _word(no, r"\s+(?:tell|inform|alert|mention\s+(?:this\s+)?to)\s+the\s+user\b")
        for no in ("do not", "don't", "never")
    ),
    _word(
        "pretend", r"\s+(?:that\s+)?you\s+(?:are|have)\s+(?:no|an?\s+unrestricted|not\s+an?\s+ai)\b"
    ),
    _word("act", r"\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|evil)\b"),
    _word("without", r"\s+(?:any\s+)?(?:restrictions|filters|safety\s+guidelines|censorship)\b"),
    # French, Spanish, Portuguese, Italian, German
    *(
        _word(
            verb,
            r"\s+(?:toutes\s+|tous\s+)?(?:les\s+|vos\s+|tes\s+)?(?:instructions|consignes|"
            r"règles)\s+(?:précédentes|antérieures|ci-dessus)",
        )
        for verb in ("ignorez", "ignore", "oubliez", "oublie")
    ),
    *(
        _word(
            verb,
            r"\s+(?:todas\s+|tutte\s+)?(?:las\s+|as\s+|le\s+|tus\s+|suas\s+)?(?:instrucciones|"
            r"instruções|istruzioni|regras|reglas)\s+(?:anteriores|precedenti|previas)",
        )
        for verb in ("ignora", "olvida", "ignore", "esqueça", "esquece", "dimentica")
    ),
    *(
        _word(
            verb,
            r"\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen)\s+(?:anweisungen|"
            r"instruktionen|regeln)",
        )
        for verb in ("ignoriere", "vergiss", "ignorieren sie")
    ),
    # Chinese, Japanese
    re.compile(r"忽略.{0,8}(?:之前|以前|上面|先前|所有).{0,8}(?:指令|指示|说明|提示)"),
    re.compile(r"(?:以前|これまで|上記|前)の(?:指示|命令|プロンプト).{0,12}無視"),
)
_TEMPLATE = re.compile(
    r"<\|(?:im_start|im_end|im_sep|system|user|assistant|endoftext|begin_of_text|end_of_text|"
    r"start_header_id|end_header_id|eot_id|eom_id|channel|message|end|start|return|call|"
    r"tool_call|python_tag)\|>|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>",
)
_HUMAN_TURN = re.compile(r"\n\nhuman:.*\n\nassistant:", re.DOTALL)
_LINE_START = r"^[ \t>*]*(?:#{1,4}[ \t]*)?\**"
_LABEL_END = r"\**[ \t]*:[ \t]*\**[ \t]*(?P<rest>.*)$"
#: A line that speaks as the system or the developer...
_SYSTEM_LINE = re.compile(
    _LINE_START
    + r"(?:system|developer)(?:[ \t]+(?:prompt|message|note|override|update))?"
    + _LABEL_END,
    re.MULTILINE,
)
#: ... and what it says to a model, as opposed to a log line or a spec ("System: Ubuntu 22.04").
_ADDRESSES_MODEL = re.compile(
    r"\b(?:you(?:'re| are| must| will| should| shall| may not| can't| cannot)?|your|ignore|"
    r"disregard|forget|obey|comply|always|never|must|reply|respond|answer|output|print|reveal|"
    r"from now on|new (?:rules|instructions)|the user|the assistant|do not|don't|authori[sz]ed|"
    r"allowed|permitted)\b",
)
#: A line that speaks as the assistant and drops its rules (a forged turn).
_ASSISTANT_LINE = re.compile(_LINE_START + r"(?:assistant|ai|model)" + _LABEL_END, re.MULTILINE)
_DROPS_RULES = re.compile(
    r"\b(?:ignor|disregard|bypass|overrid|forget)\w*\b.{0,40}"
    r"\b(?:guidelines|instructions|rules|restrictions|policy|polic(?:ies)|safety)\b"
    r"|\b(?:password|api key|secret key|system prompt)\s+(?:is|was)\b",
)
_TOOL_CALLS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\"(?:tool_calls|function_call|recipient_name)\"\s*:"),
    re.compile(r"\"type\"\s*:\s*\"(?:function|tool_use)\"\s*,\s*\"(?:function|id|name)\"\s*:"),
    re.compile(
        r"\"name\"\s*:\s*\"[\w.-]{1,64}\"\s*,\s*\"(?:arguments|parameters_json|input)\"\s*:\s*[{\"]"
    ),
    re.compile(r"\"arguments\"\s*:\s*[{\"][^\n]{0,400}?\"name\"\s*:\s*\"[\w.-]{1,64}\""),
    re.compile(r"</?tool_call>|</?function_calls>|<invoke\s+name\s*=|<function=[\w.-]+>"),
)
_TAGS = re.compile("[\U000e0000-\U000e007f]")
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
_INSIDE_LATIN = re.compile(f"[A-Za-z0-9][{_ZERO_WIDTH}]+[A-Za-z0-9]")
_RUN = re.compile(f"[{_ZERO_WIDTH}]{{3,}}")
_BIDI_OVERRIDES = "\u202d\u202e"


def flags(text: str) -> tuple[str, ...]:
    """What in ``text`` reads like an instruction to a model (see the module docstring).

    Returns the flags in :data:`FLAGS` order; an empty tuple for ordinary text.
    """
    if not text:
        return ()
    low = text.lower()
    found: list[str] = []
    if _TEMPLATE.search(low) or _HUMAN_TURN.search(low) or _role_line(low):
        found.append(ROLE_MARKER)
    if any(pattern.search(low) for pattern in _OVERRIDES):
        found.append(OVERRIDE)
    if any(pattern.search(low) for pattern in _TOOL_CALLS):
        found.append(TOOL_CALL)
    if text.isascii():
        return tuple(found)
    if _TAGS.search(text):
        found.append(HIDDEN_TAGS)
    body = text[1:] if text.startswith("\ufeff") else text  # a leading BOM is a file's
    if any(c in body for c in _ZERO_WIDTH) and (_INSIDE_LATIN.search(body) or _RUN.search(body)):
        found.append(INVISIBLE)
    elif any(c in body for c in _BIDI_OVERRIDES):
        found.append(INVISIBLE)
    return tuple(found)


def _role_line(low: str) -> bool:
    """A line that speaks as the system to the model, or as the assistant dropping its rules."""
    if ":" not in low:
        return False
    if any(_ADDRESSES_MODEL.search(m.group("rest")) for m in _SYSTEM_LINE.finditer(low)):
        return True
    return any(_DROPS_RULES.search(m.group("rest")) for m in _ASSISTANT_LINE.finditer(low))


class FlagMetrics:
    """Thread-safe counts of flagged text: recalled to a model, by flag; kept out, by where."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recalled: Counter[str] = Counter()
        self._kept_out: Counter[str] = Counter()

    def recalled(self, found: Iterable[str]) -> None:
        """Count the flags of recalled texts a tool just handed to a model."""
        counts = Counter(found)
        if counts:
            with self._lock:
                self._recalled.update(counts)

    def kept_out(self, where: str, count: int) -> None:
        """Count flagged messages kept out of a ``summary`` or a ``memory``."""
        if count:
            with self._lock:
                self._kept_out[where] += count

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        """(recalled by flag, kept out by where), read at one instant."""
        with self._lock:
            return {f: self._recalled[f] for f in FLAGS}, dict(self._kept_out)


__all__ = [
    "FLAGS",
    "HIDDEN_TAGS",
    "INVISIBLE",
    "OVERRIDE",
    "ROLE_MARKER",
    "TOOL_CALL",
    "FlagMetrics",
    "flags",
]
