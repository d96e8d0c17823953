"""A batch sent twice with one idempotency key is stored once, on every backend.

A key reused with other messages is refused, and user metadata cannot pose as a key.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from engram import idempotency
from engram.engine import Engram
from engram.errors import IdempotencyConflict, InvalidMessage
from engram.session import Session

QUESTION = [{"role": "user", "content": "When is the launch?"}]


def test_a_retry_stores_nothing_and_gets_the_first_messages_back(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    first = chat.add_many(
        [*QUESTION, {"role": "assistant", "content": "April 8."}], idempotency_key="turn-1"
    )
    again = chat.add_many(
        [*QUESTION, {"role": "assistant", "content": "April 8."}], idempotency_key="turn-1"
    )
    assert [m.id for m in again] == [m.id for m in first] and len(first) == 2
    assert [m.content for m in chat.messages()] == ["When is the launch?", "April 8."]
    assert all(idempotency.key_of(m) == "turn-1" for m in first)


def test_a_key_reused_with_other_messages_is_refused_naming_it(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    first = chat.add_many(QUESTION, idempotency_key="turn-1")
    other = [{"role": "user", "content": "And the budget?"}]
    with pytest.raises(IdempotencyConflict, match="'turn-1'") as refused:
        chat.add_many(other, idempotency_key="turn-1")
    assert (refused.value.key, refused.value.field) == ("turn-1", "idempotency_key")
    assert [m.id for m in chat.messages()] == [m.id for m in first]  # nothing dropped silently
    for changed in (  # any change of a stored field is another batch
        [{"role": "system", "content": "When is the launch?"}],
        [{"role": "user", "content": "When is the launch?", "name": "maya"}],
        [{"role": "user", "content": "When is the launch?", "metadata": {"lang": "en"}}],
        [*QUESTION, *QUESTION],
    ):
        with pytest.raises(IdempotencyConflict):
            chat.add_many(changed, idempotency_key="turn-1")
    assert len(chat.messages()) == 1


def test_a_retry_stamped_again_is_still_the_same_request(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    first = chat.add_many(
        [{**QUESTION[0], "created_at": "2025-03-06T10:00:00Z"}], idempotency_key="turn-1"
    )
    again = chat.add_many(
        [{**QUESTION[0], "created_at": "2025-03-06T10:00:05Z"}], idempotency_key="turn-1"
    )
    assert [m.id for m in again] == [m.id for m in first]
    assert len(chat.messages()) == 1


def test_user_metadata_cannot_pose_as_a_key(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    chat.add_many([{**QUESTION[0], "metadata": {"idempotency_key": "turn-1"}}])
    stored = chat.add_many([{"role": "user", "content": "Other"}], idempotency_key="turn-1")
    assert [m.content for m in stored] == ["Other"]
    assert [m.content for m in chat.messages()] == ["When is the launch?", "Other"]
    assert chat.messages()[0].metadata == {"idempotency_key": "turn-1"}  # kept as the user's


def test_the_reserved_metadata_key_is_refused(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    forged = {idempotency.RECORD: {"key": "turn-1", "fingerprint": "0" * 64}}
    with pytest.raises(InvalidMessage, match=idempotency.RECORD) as refused:
        chat.add_many([{**QUESTION[0], "metadata": forged}])
    assert refused.value.field == f"messages[0].metadata.{idempotency.RECORD}"
    with pytest.raises(InvalidMessage, match="reserved"):
        chat.add("user", "hi", metadata=forged)
    assert chat.info() is None


def test_an_edit_of_a_keyed_message_keeps_the_users_metadata_only(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    [first] = chat.add_many([{**QUESTION[0], "metadata": {"lang": "en"}}], idempotency_key="turn-1")
    edited = chat.edit(first.id, "When is the beta?")
    assert edited.metadata == {"lang": "en", "edited_from": first.id}
    assert idempotency.key_of(edited) is None
    assert idempotency.key_of(first) == "turn-1" and first.metadata["lang"] == "en"


def test_other_keys_and_no_key_store_again(mem: Engram) -> None:
    chat = mem.session("s", "proj")
    chat.add_many(QUESTION, idempotency_key="turn-1")
    chat.add_many(QUESTION, idempotency_key="turn-2")
    chat.add_many(QUESTION)
    chat.add_many(QUESTION)
    assert len(chat.messages()) == 4
    other = mem.session("other", "proj")  # a key is the session's own
    assert len(other.add_many(QUESTION, idempotency_key="turn-1")) == 1


@pytest.mark.parametrize(
    ("key", "says"),
    [(7, "must be a string"), ("  ", "must not be blank"), ("k" * 257, "the limit is 256")],
)
def test_a_bad_key_is_refused_naming_it(mem: Engram, key: Any, says: str) -> None:
    chat = mem.session("s", "proj")
    with pytest.raises(InvalidMessage, match="idempotency_key") as refused:
        chat.add_many(QUESTION, idempotency_key=key)
    assert says in str(refused.value)
    assert chat.messages() == []


def test_two_copies_at_the_same_moment_store_once(
    mem: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow write widens the window between looking for the key and storing the batch:
    # without the lock both copies find nothing and both store.
    write = Session.add_checked

    def slow_write(self: Session, batch: Any) -> Any:
        time.sleep(0.2)
        return write(self, batch)

    monkeypatch.setattr(Session, "add_checked", slow_write)
    start = threading.Barrier(2)
    results: list[list[int]] = []

    def send() -> None:
        chat = mem.session("s", "proj")
        start.wait()
        results.append([m.id for m in chat.add_many(QUESTION, idempotency_key="same")])

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(results) == 2 and results[0] == results[1]
    assert len(mem.session("s", "proj").messages()) == 1
