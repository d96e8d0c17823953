"""Important data: the structured facts that must survive summarization.

The structure is :data:`IMPORTANT_KEYS`, extracted either by the
model with the prompt (:data:`EXTRACTION_PROMPT`) or offline by rules
(:func:`extract_offline`): URLs, stated preferences, decisions, key facts,
named entities and document sections.

Everything that comes in (a model's JSON, a stored state) goes through
:func:`validate_important_data`, and cycles combine with
:func:`merge_important_data`: dicts merged (new wins per key, recursively),
lists de-duplicated in order (strings compared case- and
whitespace-insensitively), URLs normalized.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from engram.compaction.entities import find_entities, keep_longest
from engram.compaction.statements import DECISION, FACT, PREFERENCE, statements
from engram.compaction.transcript import split_sentences, text_of
from engram.errors import LLMBadResponse
from engram.models import JSON

log = logging.getLogger(__name__)

#: The important-data extraction prompt, verbatim.
EXTRACTION_PROMPT = """\
You are extracting important structured data from a conversation that will be summarized.
Extract ONLY critical facts, preferences, decisions, and information that must be preserved.
Return valid JSON with this structure:
{
  "user_preferences": {},
  "key_decisions": [],
  "important_facts": [],
  "source_urls": [],
  "document_structure": {},
  "entities": [],
  "custom_fields": {}
}

Only include fields that have data. Be concise but comprehensive."""

#: Keys whose value is an object.
DICT_KEYS = ("user_preferences", "document_structure", "custom_fields")
#: Keys whose value is a list.
LIST_KEYS = ("key_decisions", "important_facts", "source_urls", "entities")
#: The structure, in its order.
IMPORTANT_KEYS = (
    "user_preferences",
    "key_decisions",
    "important_facts",
    "source_urls",
    "document_structure",
    "entities",
    "custom_fields",
)
#: Longest string kept for one item; longer ones are cut (a model can ramble).
MAX_ITEM_CHARS = 500
#: A fact needs this many words to say something on its own.
MIN_FACT_WORDS = 4
#: Most items kept per list after a merge (oldest dropped first).
MAX_LIST_ITEMS = 200


def empty_important_data() -> JSON:
    """The structure with every field empty."""
    return {key: ({} if key in DICT_KEYS else []) for key in IMPORTANT_KEYS}


def is_empty(data: Mapping[str, Any]) -> bool:
    """Tell whether no field holds anything."""
    return not any(data.get(key) for key in IMPORTANT_KEYS)


# -- validation -------------------------------------------------------------------


def validate_important_data(obj: Any) -> JSON:
    """Coerce ``obj`` to the structure, dropping what cannot be used.

    * a missing or null field becomes empty; a list field given as a string
      becomes a one-item list; list items that are numbers become strings;
    * a dict field of the wrong type is dropped (with a log line);
    * unknown top-level keys move into ``custom_fields``;
    * URLs are normalized and every list is de-duplicated.

    Raises:
        LLMBadResponse: ``obj`` is not a JSON object at all.

    """
    if not isinstance(obj, Mapping):
        raise LLMBadResponse(f"important data must be a JSON object, got {type(obj).__name__}")
    out = empty_important_data()
    extra: JSON = {}
    for key, value in obj.items():
        if key in DICT_KEYS:
            if isinstance(value, Mapping):
                out[key] = _clean_dict(value)
            elif value not in (None, "", []):
                log.warning("important data: dropped %s of type %s", key, type(value).__name__)
        elif key in LIST_KEYS:
            out[key] = _clean_list(value, key)
        elif value not in (None, "", [], {}):
            extra[str(key)] = _clean_value(value)
    if extra:
        out["custom_fields"] = {**extra, **out["custom_fields"]}
    out["source_urls"] = _dedupe(
        [normalize_url(u) if isinstance(u, str) else u for u in out["source_urls"]]
    )
    return out


def _clean_value(value: Any) -> Any:
    if isinstance(value, str):
        return _cut(value.strip())
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return value
    if isinstance(value, Mapping):
        return _clean_dict(value)
    if isinstance(value, list | tuple):
        return _dedupe([_clean_value(v) for v in value if v not in (None, "")])
    return _cut(str(value))


def _clean_dict(value: Mapping[Any, Any]) -> JSON:
    return {str(k): _clean_value(v) for k, v in value.items() if v not in (None, "")}


def _clean_list(value: Any, key: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        log.warning("important data: dropped %s of type %s", key, type(value).__name__)
        return []
    items: list[Any] = []
    for item in value:
        if item is None:
            continue
        if isinstance(item, Mapping):
            items.append(_clean_dict(item))
        elif isinstance(item, list | tuple):
            items.extend(_clean_value(v) for v in item if v not in (None, ""))
        elif text := " ".join(str(item).split()):
            items.append(_cut(text))
    return _dedupe(items)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"


# -- merging ----------------------------------------------------------------------


def merge_important_data(old: Any, new: Any) -> JSON:
    """Combine two important-data documents; ``new`` is the later cycle.

    Dicts are merged key by key (new wins for scalars; nested dicts merge;
    nested lists concatenate), lists are concatenated old first and
    de-duplicated in order, URLs normalized; an entity that a longer one
    already says ("Priya" beside "Priya Raman") is kept once. Neither input is
    modified.
    """
    old_data = validate_important_data(old or {})
    new_data = validate_important_data(new or {})
    merged = empty_important_data()
    for key in DICT_KEYS:
        merged[key] = _merge_dicts(old_data[key], new_data[key])
    for key in LIST_KEYS:
        merged[key] = _dedupe([*old_data[key], *new_data[key]])[-MAX_LIST_ITEMS:]
    names = [e for e in merged["entities"] if isinstance(e, str)]
    kept = set(keep_longest(names))
    merged["entities"] = [e for e in merged["entities"] if not isinstance(e, str) or e in kept]
    return merged


def _merge_dicts(old: Mapping[str, Any], new: Mapping[str, Any]) -> JSON:
    out = dict(old)
    for key, value in new.items():
        previous = out.get(key)
        if isinstance(previous, Mapping) and isinstance(value, Mapping):
            out[key] = _merge_dicts(previous, value)
        elif isinstance(previous, list) and isinstance(value, list):
            out[key] = _dedupe([*previous, *value])
        else:
            out[key] = value
    return out


def _dedupe(items: Iterable[Any]) -> list[Any]:
    """Keep the first of equal items; strings compare case- and whitespace-insensitively."""
    seen: set[str] = set()
    out: list[Any] = []
    for item in items:
        key = _identity(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _identity(item: Any) -> str:
    if isinstance(item, str):
        return "s:" + " ".join(item.split()).casefold()
    return "j:" + json.dumps(item, sort_keys=True, default=str)


# -- URLs -------------------------------------------------------------------------

_URL = re.compile(r"\bhttps?://[^\s<>\"'`\]\[{}|\\^]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}'\"»"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_url(url: str) -> str:
    """Return the canonical form of a URL.

    Lowercase scheme and host, no default port, no fragment, no trailing
    punctuation. Text that is not a URL is only stripped.
    """
    text = url.strip()
    while text and text[-1] in _TRAILING:
        # Keep a closing parenthesis that belongs to the URL, as in Wikipedia links.
        if text[-1] == ")" and text.count("(") >= text.count(")"):
            break
        text = text[:-1]
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        return text
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    if parts.username:
        userinfo = parts.username + (f":{parts.password}" if parts.password else "")
        netloc = f"{userinfo}@{netloc}"
    return urlunsplit((scheme, netloc, parts.path, parts.query, ""))


def find_urls(text: str) -> list[str]:
    """Every http(s) URL in ``text``, normalized, in order, without repeats."""
    return _dedupe(normalize_url(m.group(0)) for m in _URL.finditer(text))


# -- offline extraction -----------------------------------------------------------

_PREFERENCE = re.compile(
    r"\b(?:i\s+(?:really\s+)?(?:prefer|like|love|want|need)|i'd\s+(?:prefer|like)|"
    r"i\s+would\s+(?:prefer|like)|please\s+always|always\s+use|never\s+use|"
    r"please\s+never|my\s+preference\s+is)\b\s*(?P<what>[^.!?\n]*)",
    re.IGNORECASE,
)
_FACT = re.compile(
    r"\b(?:the\s+)?(?:key|main|important|critical|central)\s+"
    r"(?:finding|fact|point|result|insight|takeaway)\s+(?:is|was)\s+(?:that\s+)?"
    r"(?P<fact>[^.!?\n]+)|\b(?:remember|note)\s+that\s+(?P<note>[^.!?\n]+)|"
    r"\bimportant\s*:\s*(?P<imp>[^.!?\n]+)",
    re.IGNORECASE,
)
#: Who does what: a fact worth keeping even without a number ("Daniel owns rollback").
_OWNER = re.compile(
    r"\b(?:owns|own|leads|lead|runs|manages|handles|is\s+in\s+charge\s+of|"
    r"is\s+responsible\s+for|is\s+the\s+\w+(?:\s+\w+)?\s+(?:owner|maker|lead|manager))\b",
    re.IGNORECASE,
)
_SECTIONS = re.compile(
    r"\b(?:sections?|chapters?|structure|outline|parts?|headings?)\s*"
    r"(?:for|of|are|is|include|includes|including|with|like|:|should\s+be|will\s+be)?\s*:?\s*"
    r"(?P<list>(?:[A-Z][\w&/-]*(?:\s+[A-Z][\w&/-]*)*)(?:\s*(?:,|;|\band\b|&)\s*"
    r"(?:and\s+)?[A-Z][\w&/-]*(?:\s+[A-Z][\w&/-]*)*)+)",
)
_KNOWN_SECTIONS = frozenset(
    "abstract introduction intro background methods methodology results discussion "
    "conclusion conclusions references appendix summary overview".split()
)
_BARE_LIST = re.compile(
    r"(?P<list>[A-Z][a-z]+(?:\s*,\s*(?:and\s+)?[A-Z][a-z]+){2,}(?:\s*,?\s*and\s+[A-Z][a-z]+)?)"
)
_THEMES = re.compile(r"\b(dark|light)\s+(?:mode|theme)\b", re.IGNORECASE)
_FONT = re.compile(
    r"\b(?:font\s+(?:is\s+|to\s+be\s+)?)?([A-Z][a-zA-Z]+)\s+font\b|\bfont\s*:?\s*([A-Z][a-zA-Z]+)"
)
_LANGUAGE = re.compile(
    r"\b(?:in|respond\s+in|answer\s+in|write\s+in)\s+(english|french|german|spanish|italian|"
    r"portuguese|dutch|japanese|chinese|korean|russian|arabic|hindi)\b",
    re.IGNORECASE,
)
_LENGTH = re.compile(
    r"\b(concise|short|brief|detailed|verbose|long)\s+(?:answers|responses|replies|output)\b",
    re.IGNORECASE,
)
_FORMAT = re.compile(r"\b(markdown|bullet\s+points|tables|plain\s+text|json)\b", re.IGNORECASE)
_TONE = re.compile(
    r"\b(formal|casual|friendly|professional)\s+(?:tone|style|language)\b", re.IGNORECASE
)


def extract_offline(messages: Sequence[Mapping[str, Any]]) -> JSON:
    """Rule-based important data from OpenAI-format messages; deterministic.

    Decisions, preferences and facts are the conversation's statements
    (:func:`engram.compaction.statements.statements`): the user's, in the third
    person, and the assistant's records of what the user decided. Facts are the
    user's statements with a number, a date or an owner ("Daniel Okafor leads
    engineering"), and what the user marks as important ("the key finding is
    ..."); sections are read from user messages; URLs and entities (names of
    people, products, places and organisations) from every message. Returns the
    full structure (empty fields included).
    """
    return extract_with_sources(messages)[0]


#: Where each item of :func:`extract_with_sources` came from: field -> item key
#: (:func:`cite_key`) -> indexes of the messages that said it.
Sources = dict[str, dict[str, set[int]]]


def extract_with_sources(messages: Sequence[Mapping[str, Any]]) -> tuple[JSON, Sources]:
    """:func:`extract_offline`, and the messages (by index) each item came from."""
    data = empty_important_data()
    prefs: JSON = data["user_preferences"]
    found: list[tuple[str, str, int]] = []
    texts = [text_of(m) for m in messages]
    for index, (message, text) in enumerate(zip(messages, texts, strict=True)):
        for url in find_urls(text):
            data["source_urls"].append(url)
            found.append(("source_urls", cite_key(url), index))
        if message.get("role") != "user" or not text.strip():
            continue
        for sentence in split_sentences(text):
            for match in _FACT.finditer(sentence):
                fact = match.group("fact") or match.group("note") or match.group("imp")
                data["important_facts"].append(fact.strip(" ,;:"))
                found.append(("important_facts", cite_key(fact.strip(" ,;:")), index))
        sections = _sections(text)
        if sections:
            structure = data["document_structure"]
            structure["sections"] = _dedupe([*structure.get("sections", []), *sections])
            found.append(("document_structure", "sections", index))
    for said in statements(messages):
        if said.kind == DECISION:
            data["key_decisions"].append(said.text)
            found.append(("key_decisions", cite_key(said.text), said.message))
        elif said.kind == PREFERENCE:
            for key in _preferences(said.source, said.text, prefs):
                found.append(("user_preferences", key, said.message))
        elif said.kind == FACT and said.role == "user" and _worth_keeping(said.text):
            data["important_facts"].append(said.text)
            found.append(("important_facts", cite_key(said.text), said.message))
    sections = data["document_structure"].get("sections", [])
    data["entities"] = find_entities(texts, exclude=sections)
    for name in data["entities"]:
        for index, text in enumerate(texts):
            if name in text:
                found.append(("entities", cite_key(name), index))
    sources: Sources = {}
    for name, key, index in found:
        sources.setdefault(name, {}).setdefault(key, set()).add(index)
    return validate_important_data(data), sources


def cite_key(item: Any, within: str | None = None) -> str:
    """The key an important-data item's citation is kept under.

    A list item's key is its identity as de-duplication compares it (after the
    cut of :data:`MAX_ITEM_CHARS`); an entry of an object field is its key, and
    an element of a list inside one is the key, a newline and its identity (``within``).
    """
    if isinstance(item, str):
        item = _cut(" ".join(item.split()))
    identity = _identity(item)
    return identity if within is None else f"{within}\n{identity}"


def _worth_keeping(fact: str) -> bool:
    """Who owns or runs what ("Daniel Okafor leads engineering"), said in so many words.

    Other facts stay in the summary: repeating them here cost about 230 tokens of
    prompt on the sample conversation and kept no fact the summary had lost.
    """
    if len(fact.split()) < MIN_FACT_WORDS or _FACT.search(fact):
        return False
    return bool(_OWNER.search(fact))


def _preferences(sentence: str, stated_as: str, prefs: JSON) -> list[str]:
    """File a preference: a known kind (theme, font, language, ...) or the statement itself.

    Returns the citation keys (:func:`cite_key`) of what it filed.
    """
    match = _PREFERENCE.search(sentence)
    what = match.group("what").strip(" ,;:") if match else sentence
    keys: list[str] = []
    if theme := _THEMES.search(sentence):
        prefs["theme"] = theme.group(1).lower()
        keys.append("theme")
    if (font := _FONT.search(what)) and (name := font.group(1) or font.group(2)):
        prefs["font"] = name.lower()
        keys.append("font")
    if lang := _LANGUAGE.search(sentence):
        prefs["language"] = lang.group(1).capitalize()
        keys.append("language")
    if length := _LENGTH.search(sentence):
        prefs["answer_length"] = length.group(1).lower()
        keys.append("answer_length")
    if tone := _TONE.search(sentence):
        prefs["tone"] = tone.group(1).lower()
        keys.append("tone")
    if not keys and (fmt := _FORMAT.search(what)):
        prefs["format"] = " ".join(fmt.group(1).lower().split())
        keys.append("format")
    if not keys:
        prefs.setdefault("stated", []).append(stated_as)
        keys.append(cite_key(stated_as, within="stated"))
    return keys


def _sections(text: str) -> list[str]:
    for match in _SECTIONS.finditer(text):
        items = _split_list(match.group("list"))
        if len(items) >= 2:
            return items
    for match in _BARE_LIST.finditer(text):
        items = _split_list(match.group("list"))
        if sum(item.lower() in _KNOWN_SECTIONS for item in items) >= 2:
            return items
    return []


def _split_list(text: str) -> list[str]:
    parts = re.split(r"\s*(?:,|;|&|\band\b)\s*", text)
    return [p.strip() for p in parts if p.strip() and p.strip().lower() != "and"]


#: Newest items of each list, and newest keys of each object, the prompt shows.
#: The state keeps everything; this keeps the section near the 200-500 tokens.
PROMPT_LIST_ITEMS = 12
PROMPT_DICT_KEYS = 20


def to_prompt_text(data: Mapping[str, Any]) -> str:
    """Render important data as the prompt shows it: the non-empty fields as indented JSON.

    Only the newest :data:`PROMPT_LIST_ITEMS` of a list (and newest
    :data:`PROMPT_DICT_KEYS` of an object) are shown; how many older ones were
    left out is said, so the model knows to search the history for them.
    """
    shown: JSON = {}
    hidden: dict[str, int] = {}
    for key in IMPORTANT_KEYS:
        value = data.get(key)
        if not value:
            continue
        if isinstance(value, list) and len(value) > PROMPT_LIST_ITEMS:
            hidden[key] = len(value) - PROMPT_LIST_ITEMS
            value = value[-PROMPT_LIST_ITEMS:]
        elif isinstance(value, Mapping) and len(value) > PROMPT_DICT_KEYS:
            hidden[key] = len(value) - PROMPT_DICT_KEYS
            value = dict(list(value.items())[-PROMPT_DICT_KEYS:])
        shown[key] = value
    if hidden:
        shown["older_items_not_shown"] = hidden
    return json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=False)
