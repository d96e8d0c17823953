"""What a conversation states: decisions, preferences and facts, as a person would note them.

:func:`statements` reads messages (OpenAI format) sentence by sentence and
keeps what was said as a statement, in declarative form, leaving out what a
note-taker leaves out:

* questions ("Realistic?", "I want to know how many ..."), pleasantries and
  acknowledgements ("Good catch.", "Beta flag."), requests to the assistant
  ("Can you write up ...", "Put that in the doc too.");
* discourse openers are taken off ("Ok, ...", "Oh, and ...", "Quick recap for
  you: ...");
* the user's sentences are rewritten in the third person
  (:mod:`engram.compaction.person`);
* decisions: the user's "we decided / agreed / let's go with / X it is / we'll
  take ...", a marker that heads what follows ("Decided! Pro is $14 ...; Business
  $32 ..."), and the assistant's records ("Recorded: ...", "Noted as a decision:
  ...", a record right after the user decided or changed something); a
  "Corrected:" record replaces the decision it corrects;
* preferences: the user's "I prefer / like / want ...", "please always ...",
  when what is preferred says something ("I like that framing" does not);
* facts: every other statement; the assistant's explanations are kept as
  notes (lower in rank), its advice as "Suggested: ...", never its talk about
  itself or to "you".

Deterministic and pure: the same messages give the same statements.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engram.compaction.person import THE_USER, speaker_name, third_person
from engram.compaction.transcript import split_sentences, text_of, tool_call_names
from engram.compaction.words import is_filler

#: How the assistant is named when its words are kept.
ASSISTANT = "the assistant"

DECISION = "decision"
PREFERENCE = "preference"
FACT = "fact"
#: The assistant's explanations, advice and tool activity: kept below what was stated.
NOTE = "note"

#: A statement needs this many words to say something on its own ("Beta flag." does not).
MIN_WORDS = 3
#: The assistant's explanations need one more ("Nothing decided yet." says nothing).
MIN_NOTE_WORDS = 4
#: A decision needs this many words to say what was decided ("April 9 it is" does not).
MIN_DECISION_WORDS = 4
#: Sentences a decision marker ("Decided!") gathers from what follows it.
MAX_MARKED = 3
#: Share of content words a correction shares with the decision it replaces.
CORRECTION_OVERLAP = 0.5


@dataclass(frozen=True, slots=True)
class Statement:
    """One thing the conversation states, in declarative form.

    Attributes:
        order: Position in the conversation (statements are returned in this order).
        message: Index of the message it comes from.
        role: Who said it: "user", "assistant" or "tool".
        kind: :data:`DECISION`, :data:`PREFERENCE`, :data:`FACT` or :data:`NOTE`.
        text: The statement, ending with punctuation.
        source: The sentence as said (for rules that read the user's own words).
        explicit: A decision said in so many words ("decided", "agreed", a record).

    """

    order: int
    message: int
    role: str
    kind: str
    text: str
    source: str = ""
    explicit: bool = False


_OPENER = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yeah|yep|sure|right)(?:\s*[,:;!.—–-]+|\s+(?=[a-z]))|"
    r"(?:no|fine|great|good|perfect|wow|well|cool|nice|"
    r"excellent|alright|understood|sorry|thanks|thank you|hmm+|sounds good|got it|wait|"
    r"good (?:one|catch|point|news)|makes sense|hi|hello|hey|morning)\s*[,:;!.—–-]+|"
    r"(?:also|oh|and|but|so|then|plus|btw|actually|anyway|by the way)\b[,:;—–-]*|"
    r"(?:quick (?:one|question|recap|update|note)|last thing|another thing|one more thing)"
    r"(?: (?:for you|today))?\s*[,:;!.—–-]+)\s*",
    re.IGNORECASE,
)
_BULLET = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+)")
_QUESTION_START = re.compile(
    r"^(?:what|how|why|when|where|which|who|whom|whose|is|are|am|do|does|did|can|could|would|"
    r"will|should|shall|may|might|has|have|had|was|were|isn't|aren't|don't|doesn't|didn't|"
    r"won't|wouldn't|shouldn't|couldn't)\b",
    re.IGNORECASE,
)
_INDIRECT_QUESTION = re.compile(
    r"^(?:i\s+(?:want|need|would\s+like|'d\s+like)\s+to\s+(?:know|understand|check)|"
    r"i\s+wonder|i'm\s+wondering|tell\s+me|remind\s+me|let\s+me\s+know|any\s+idea)\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^(?:(?:can|could|would|will)\s+you|please\s+(?!always|never)|help\s+me|i\s+need\s+you|"
    r"i\s+want\s+you|i'd\s+like\s+you)\b",
    re.IGNORECASE,
)
#: Imperatives addressed to the assistant: requests, not statements.
_WORK_VERBS = frozenset(
    """write draft send summarize summarise explain show give tell find check list create build
    fix help translate review compare ask remind describe suggest outline prepare copy paste
    email mail ping read look try do""".split()
)
#: Imperatives that change the plan ("Make it 5,000.", "Put it on April 22."): what the
#: assistant records next is the user's decision.
_PLAN_VERBS = frozenset(
    "put make set move raise lower change book schedule add mark cancel drop keep use switch "
    "rename assign".split()
)
_MARKER = re.compile(
    r"^(?P<label>decided|agreed|approved|confirmed|booked|settled|final(?:\s+decision)?|"
    r"decision|deal)(?:\s*[!.]+\s*$|\s*[:,!—–-]+\s*(?P<rest>.*))$",
    re.IGNORECASE,
)
_DECIDED = re.compile(
    r"\b(?:we(?:'ve|\s+have)?\s+decided|i(?:'ve|\s+have)?\s+decided|decided\s+to|decided\s+on|"
    r"let(?:'s|\s+us)\s+(?:go\s+with|keep|do|use|stick|raise|set|move|make|take|book|cancel|"
    r"drop|switch|launch|ship|choose|pick(?!\s+it\s+up)|stay|add|put|change|skip|hold|split)|"
    r"we(?:'ll|\s+will)\s+go\s+with|(?:we\s+)?agreed|decision\s*:|final\s+decision|"
    r"we(?:'re|\s+are)\s+going\s+with|settled\s+on|^final\b)",
    re.IGNORECASE,
)
_WE_WILL = re.compile(
    r"^we(?:'ll|\s+will)\s+(?!decide|see|get|need|have|talk|know|check|think|let|ask|tell|be\b|"
    r"try|look|figure|come)\w+",
    re.IGNORECASE,
)
_I_WILL = re.compile(
    r"^i(?:'ll|\s+will)\s+(?!ask|tell|check|see|think|let|be\b|try|look|get\s+back|talk)\w+",
    re.IGNORECASE,
)
_IT_IS = re.compile(r"^\S+(?:\s+\S+){0,3}\s+it\s+is[.!]*$", re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\b(?:i\s+(?:really\s+|also\s+|always\s+)?(?:prefer|like|love|hate|dislike|want)|"
    r"i'd\s+(?:prefer|like|rather)|i\s+would\s+(?:prefer|like|rather)|"
    r"we\s+(?:prefer|want|like|don't\s+want)|we'd\s+(?:prefer|like|rather)|"
    r"please\s+(?:always|never)|always\s+use|never\s+use|my\s+preference\s+is)\b"
    r"\s*(?P<what>[^.!?\n]*)",
    re.IGNORECASE,
)
_CONTRAST = re.compile(r"\b(?:not|rather\s+than|instead\s+of|always|never|only)\b", re.IGNORECASE)
_EMPTY_OBJECT = re.compile(
    r"^(?:it|that|this|those|these|them|one|so|to\s+(?:know|ask|check|see|understand)\b)",
    re.IGNORECASE,
)
_RECORD = re.compile(
    r"^(?P<label>(?:recorded|recording|noted|added|updated|corrected|booked|approved|"
    r"confirmed|decided|logged|scheduled|changed|moved|done|understood|got it)\b[^:\"“]{0,30})"
    r"\s*:\s*(?P<rest>.+)$",
    re.IGNORECASE,
)
_DECISION_RECORD = re.compile(
    r"decision|decided|recorded|recording|booked|approved|confirmed|corrected|updated|scheduled|"
    r"changed|moved",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"[\"“]([^\"”]+)[\"”]")
_ABOUT_ITSELF = re.compile(r"\b(?:I|I'm|I'd|I'll|I've|me|my|mine|myself)\b")
#: The assistant saying what it does not know or cannot do: nothing to keep.
_UNKNOWING = re.compile(
    r"\bI\s+(?:don't|do\s+not|can't|cannot|couldn't)\s+(?:have|know|see|find|send|do|tell)\b|"
    r"\bI'm\s+not\s+sure\b|\bI\s+(?:shouldn't|should\s+not)\s+have\b",
)
#: The assistant offering more work ("I can sketch it if you want"): nothing happened yet.
_OFFER = re.compile(
    r"^the assistant (?:can|could|will|would be happy to) (?:also )?(?:sketch|draft|write|help|"
    r"send|prepare|add|do|check|look|put|make|create|set up|pull|run)\b",
    re.IGNORECASE,
)
_PLEASE = re.compile(r"^please\s+", re.IGNORECASE)
#: Well-wishes and greetings around the work ("Good luck with the port!", "Enjoy Lisbon!").
_WISH = re.compile(
    r"^(?:good\s+luck|best\s+of\s+luck|have\s+an?\s+(?:good|great|nice|lovely)|enjoy|"
    r"congratulations|congrats|welcome|glad|happy\s+to|hope|take\s+care|safe\s+travels|"
    r"talk\s+soon|see\s+you)\b",
    re.IGNORECASE,
)
_TO_THE_USER = re.compile(r"\b(?:you|your|you're|you'd|you'll|yours)\b", re.IGNORECASE)
_ADVICE = re.compile(
    r"^(?:please\s+)?(?:set|use|try|add|ask|send|watch|make\s+sure|switch|keep|move|take|consider|avoid|"
    r"check|run|give|put|get|restart|reconnect|update|install|remove|turn|call)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
#: A lead-in that only announces what follows ("Here is a first draft.", "Three options:").
_LEAD_IN = re.compile(r"^(?:here(?:'s|\s+is|\s+are|\s+it\s+is)\b|.*:$)", re.IGNORECASE)
#: A name heading an imperative ("Jonas Lindqvist, put his name down ...").
_VOCATIVE = re.compile(r"^[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?,\s+(?=[a-z])")
_LETS = re.compile(r"^let(?:'s|\s+us)\b", re.IGNORECASE)
_JSON_LIKE = re.compile(r"^\s*[\[{]")


def statements(messages: Sequence[Mapping[str, Any]]) -> list[Statement]:
    """Everything ``messages`` state, in conversation order (see the module docstring)."""
    name = speaker_name(text_of(m) for m in messages if m.get("role") == "user")
    reader = _Reader(name)
    for index, message in enumerate(messages):
        reader.message = index
        role = str(message.get("role", ""))
        if role == "user":
            reader.user(text_of(message))
        elif role == "assistant":
            reader.assistant(text_of(message), tool_call_names(message))
        elif role == "tool":
            reader.tool(text_of(message))
    return reader.out


class _Reader:
    """Reads a conversation message by message, remembering what the user just decided."""

    def __init__(self, name: str | None):
        self.name = name
        self.message = 0
        self.out: list[Statement] = []
        # The user's last message decided or changed something: the assistant's record of it
        # is a decision.
        self.decided = False

    def add(self, role: str, kind: str, text: str, source: str, explicit: bool = False) -> None:
        said = Statement(len(self.out), self.message, role, kind, _finish(text), source, explicit)
        self.out.append(said)

    def user(self, text: str) -> None:
        self.decided = False
        marked: str | None = None  # "Decided!" heads what follows
        gathered = 0
        for raw in split_sentences(text):
            sentence = _clean(raw)
            if not sentence or _is_question(sentence):
                marked = None
                continue
            if is_filler(sentence) or _WISH.match(sentence):
                continue
            if marker := _MARKER.match(sentence):
                self.decided = True
                label = _label(marker.group("label"))
                rest = (marker.group("rest") or "").strip()
                if rest and len(rest.split()) >= MIN_WORDS - 1:
                    self._user_decision(f"{label}: {rest}", raw)
                else:
                    marked, gathered = label, 0
                continue
            if marked is not None and gathered < MAX_MARKED and not _is_request(sentence):
                self._gather(marked, sentence, raw, first=gathered == 0)
                gathered += 1
                continue
            self._user_sentence(sentence, raw)

    def _gather(self, label: str, sentence: str, raw: str, *, first: bool) -> None:
        rewritten = third_person(sentence, self.name)
        if rewritten is None:
            return
        if first:
            self.add("user", DECISION, f"{label}: {rewritten}", raw, explicit=True)
            return
        last = self.out[-1]
        joined = _one_sentence([last.text, rewritten])
        self.out[-1] = replace(last, text=_finish(joined), source=f"{last.source} {raw}")

    def _user_sentence(self, sentence: str, raw: str) -> None:
        words = len(sentence.split())
        if _DECIDED.search(sentence) or _IT_IS.match(sentence) or _WE_WILL.match(sentence):
            self.decided = True
            if words >= MIN_DECISION_WORDS and not _IT_IS.match(sentence):
                self._user_decision(sentence, raw)
            return
        if _I_WILL.match(sentence) or _plan_change(sentence):
            self.decided = True
        if (preference := _PREFERENCE.search(sentence)) or _contrasting_request(sentence):
            what = preference.group("what").strip() if preference else sentence
            if not what or _EMPTY_OBJECT.match(what):
                return  # "I like that framing": an acknowledgement, not a preference
            if rewritten := third_person(sentence, self.name):
                self.add("user", PREFERENCE, rewritten, raw)
            return
        if _is_request(sentence) or _TO_THE_USER.search(sentence) or _LETS.match(sentence):
            return  # asked of the assistant ("Let's start with scope" too), not stated
        if words < MIN_WORDS and not _names_something(sentence):
            return
        if rewritten := third_person(sentence, self.name):
            self.add("user", FACT, rewritten, raw)

    def _user_decision(self, sentence: str, raw: str) -> None:
        if rewritten := third_person(sentence, self.name):
            self.add("user", DECISION, rewritten, raw, explicit=True)

    def assistant(self, text: str, calls: list[str]) -> None:
        if calls:
            self.add("assistant", NOTE, f"The assistant called {', '.join(calls)}", "")
        decided, self.decided = self.decided, False
        listener = self.name or THE_USER
        for raw in split_sentences(text):
            sentence = _clean(raw)
            if not sentence or _is_question(sentence) or is_filler(sentence):
                continue
            if record := _RECORD.match(sentence):
                self._record(record.group("label"), record.group("rest"), raw, decided)
                continue
            if _WISH.match(sentence) or _UNKNOWING.search(sentence):
                continue
            if len(sentence.split()) < MIN_NOTE_WORDS or _LEAD_IN.match(sentence):
                continue
            rewritten = third_person(sentence, ASSISTANT, listener=listener)
            if rewritten is None:
                continue
            if _OFFER.match(rewritten):
                continue
            if _ADVICE.match(rewritten):
                rewritten = f"Suggested: {_lower_first(_PLEASE.sub('', rewritten))}"
            self.add("assistant", NOTE, rewritten, raw)

    def _record(self, label: str, rest: str, raw: str, decided: bool) -> None:
        quoted = [q.strip() for q in _QUOTED.findall(rest)]
        pieces = quoted or [rest.strip()]
        kind = DECISION if decided or _DECISION_RECORD.search(label) else FACT
        for quoted_piece in pieces:
            # One record, one sentence: "Support readiness: Jonas; training on March 24."
            piece = _one_sentence(split_sentences(quoted_piece))
            if len(piece.split()) < MIN_WORDS or _ABOUT_ITSELF.search(piece):
                continue
            if label.lower() == "corrected":
                self._forget_corrected(piece)
            explicit = "decision" in label.lower()
            self.add("assistant", kind, _upper_first(piece), raw, explicit=explicit)

    def _forget_corrected(self, correction: str) -> None:
        """Drop the decision a correction replaces (the most similar earlier one)."""
        terms = _terms(correction)
        best, share = None, CORRECTION_OVERLAP
        for index, earlier in enumerate(self.out):
            if earlier.kind != DECISION:
                continue
            other = _terms(earlier.text)
            overlap = len(terms & other) / max(1, min(len(terms), len(other)))
            if overlap >= share:
                best, share = index, overlap
        if best is not None:
            del self.out[best]
            self.out = [replace(s, order=i) for i, s in enumerate(self.out)]

    def tool(self, text: str) -> None:
        if _JSON_LIKE.match(text):
            return  # structured output: the assistant's answer says what it meant
        for raw in split_sentences(text):
            sentence = _clean(raw)
            if len(sentence.split()) >= MIN_WORDS and not is_filler(sentence):
                self.add("tool", NOTE, sentence, raw)


def _clean(sentence: str) -> str:
    """The sentence without list bullets, discourse openers and extra spaces."""
    text = _BULLET.sub("", " ".join(sentence.split()))
    if text.count('"') % 2:
        text = text.strip('"')  # a quotation that spans lines: its lone mark goes
    while True:
        stripped = _OPENER.sub("", text, count=1)
        if stripped == text or not stripped:
            break
        text = stripped
    return _upper_first(text)


def _is_question(sentence: str) -> bool:
    if sentence.rstrip("\"'”)").endswith("?") or _INDIRECT_QUESTION.match(sentence):
        return True
    return bool(_QUESTION_START.match(sentence)) and sentence[-1:] not in ".!"


def _is_request(sentence: str) -> bool:
    """Asked of the assistant: "Can you ...", "Put that in the doc", "Jonas, put his name down"."""
    addressed = _VOCATIVE.sub("", sentence) or sentence
    first = addressed.split()[0].lower().strip(",:")
    return bool(_REQUEST.match(addressed)) or first in _WORK_VERBS or first in _PLAN_VERBS


def _plan_change(sentence: str) -> bool:
    """A clause opens with a verb that changes the plan ("Jonas, put his name down")."""
    return any(
        clause.split()[0].lower() in _PLAN_VERBS
        for clause in re.split(r"[,;:]\s*", sentence)
        if clause.strip()
    )


def _contrasting_request(sentence: str) -> bool:
    """A request that states a preference ("Please send updates by text, not email")."""
    return bool(re.match(r"please\s+\w+", sentence, re.IGNORECASE)) and bool(
        _CONTRAST.search(sentence)
    )


def _names_something(sentence: str) -> bool:
    """A short sentence still says something with a number, or a name in a clause."""
    words = sentence.split()
    named = any(w[:1].isupper() for w in words[1:]) and any(w[:1].islower() for w in words)
    return named or any(ch.isdigit() for ch in sentence)


def _one_sentence(parts: list[str]) -> str:
    """Sentences joined into one with semicolons ("A. If B." -> "A; if B.")."""
    out = ""
    for part in parts:
        if not out:
            out = part
            continue
        first = part.split(" ", 1)[0]
        if first.lower() in _FUNCTION_WORDS and first[1:].islower():
            part = part[:1].lower() + part[1:]
        out = f"{out.rstrip('.!;')}; {part}"
    return out


def _label(word: str) -> str:
    return " ".join(word.split()).capitalize()


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def _finish(text: str) -> str:
    text = text.strip().rstrip(":;,")
    return text if re.search(r"[.!?…][\"”]?$", text) else text + "."


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    """Lower an opening verb ("Set the timeout ..." -> "set the timeout ...")."""
    return text[:1].lower() + text[1:] if _ADVICE.match(text) else text


#: Words that lose their capital inside a joined sentence ("A; if B").
_FUNCTION_WORDS = frozenset(
    """if when then the a an it its this that these those there and but or so for with without
    no not all each every some any one two three four five after before until unless once
    while because since as at on in by from to of upgrade""".split()
)
