"""jsondir session logs and id counters: what a crash at each step leaves, and old directories.

An append writes one line to ``<session>.jsonl`` and fsyncs it; a rewrite of the
document folds the log in and starts a new generation; ids come from live
counters trusted only under the same boot. Each test puts the files in the state
a crash (kill -9 or power loss) at one step would leave, then opens a fresh
store, as the next process would, and checks that every acknowledged message is
there exactly once, in order, and that writing goes on.
"""

from __future__ import annotations

import json
import shutil
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engram
from engram.errors import CorruptedData
from engram.models import NewMessage
from engram.store.jsondir import ids as jsondir_ids
from engram.store.jsondir import log as jsondir_log
from engram.store.jsondir.backend import JsonDirStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
OLD_DIRECTORY = Path(__file__).resolve().parents[1] / "data" / "jsondir-v1"


def msg(content: str, role: str = "user") -> NewMessage:
    return NewMessage(role=role, content=content, created_at=T0)


def add(store: JsonDirStore, session: str, *texts: str) -> list[int]:
    stored = store.append("p", session, [msg(t) for t in texts], [1] * len(texts))
    return [m.id for m in stored]


def contents(root: Path, session: str = "s") -> list[str]:
    """What a new process reads."""
    store = JsonDirStore(root)
    try:
        rows = store.page("p", session, limit=1000)
        assert [m.id for m in rows] == sorted({m.id for m in rows}), "ids repeat or go backwards"
        info = store.get_session("p", session)
        assert info is not None and info.message_count == len(rows)
        assert info.token_count == sum(m.tokens for m in rows)
        return [m.content for m in rows]
    finally:
        store.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "ctx"


@pytest.fixture
def store(root: Path) -> JsonDirStore:
    return JsonDirStore(root)


def paths(root: Path, session: str = "s") -> tuple[Path, Path]:
    folder = root / "p" / "sessions"
    return folder / f"{session}.json", folder / f"{session}.jsonl"


class TestAppendsGoToTheLog:
    def test_the_document_is_written_once_then_the_log_grows(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "one")
        document, log = paths(root)
        written = document.read_bytes()
        add(store, "s", "two")
        add(store, "s", "three", "four")
        assert document.read_bytes() == written  # not rewritten per message
        lines = log.read_bytes().split(b"\n")
        assert json.loads(lines[0])["generation"] == json.loads(written)["log_generation"]
        assert [len(json.loads(line)["messages"]) for line in lines[1:-1]] == [1, 2]
        assert contents(root) == ["one", "two", "three", "four"]

    def test_a_state_change_folds_the_log_into_the_document(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "one", "two")
        add(store, "s", "three")
        store.save_state("p", "s", "compaction", {"summary": "x"}, expected_version=0)
        document, log = paths(root)
        assert not log.exists()
        history = json.loads(document.read_text())["recent_history"]
        assert [e["content"] for e in history] == ["one", "two", "three"]
        add(store, "s", "four")
        assert contents(root) == ["one", "two", "three", "four"]

    def test_a_log_larger_than_its_document_is_folded(
        self, store: JsonDirStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(jsondir_log, "FOLD_MIN_BYTES", 0)
        for i in range(40):
            add(store, "s", f"message {i}")
        document, _ = paths(root)
        in_document = len(json.loads(document.read_text())["recent_history"])
        assert 20 <= in_document < 40  # folded on the way, the newest still in the log
        assert contents(root) == [f"message {i}" for i in range(40)]

    def test_line_breaks_other_than_newline_stay_inside_a_record(
        self, store: JsonDirStore, root: Path
    ) -> None:
        tricky = ["a\u2028b", "c\u2029d", "e\rf", "g\x0bh\x0ci", "j\x1ck\x85l", "m\nn"]
        add(store, "s", "first")
        for text in tricky:
            add(store, "s", text)
        assert contents(root) == ["first", *tricky]

    def test_a_deleted_message_leaves_no_copy_in_a_log(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "keep")
        (secret,) = add(store, "s", "secret number 4711")
        store.delete_messages("p", "s", [secret])
        assert not any(b"4711" in p.read_bytes() for p in root.rglob("*") if p.is_file())
        assert contents(root) == ["keep"]

    def test_a_purged_session_does_not_come_back_with_its_log(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "old one")
        add(store, "s", "old two")
        assert store.delete_session("p", "s")
        assert not any(paths(root)[1].parent.iterdir())
        add(store, "s", "new")
        assert contents(root) == ["new"]


class TestCrashes:
    def test_killed_mid_append_leaves_a_torn_line_that_is_cut_off(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "one")
        add(store, "s", "two")
        _, log = paths(root)
        with log.open("ab") as handle:  # half of a record: the writer died in its write
            handle.write(b'{"at": "2024-05-01T12:00:00+00:00", "messages": [{"id": 99, "ro')
        assert contents(root) == ["one", "two"]  # never acknowledged: not a message
        other = JsonDirStore(root)  # the next process appends after the good records
        add(other, "s", "three")
        assert contents(root) == ["one", "two", "three"]
        assert b'"id": 99' not in log.read_bytes()

    def test_killed_after_the_fold_before_the_log_is_removed(
        self, store: JsonDirStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        add(store, "s", "one")
        add(store, "s", "two")
        add(store, "s", "three")

        def die(path: Path) -> None:
            raise KeyboardInterrupt  # the process ends here, like a kill -9

        monkeypatch.setattr("engram.store.jsondir.docs.remove_log", die)
        with pytest.raises(KeyboardInterrupt):
            store.save_state("p", "s", "compaction", {"summary": "x"}, expected_version=0)
        monkeypatch.undo()
        _, log = paths(root)
        assert log.exists()  # the folded log is still there, with the old generation
        assert contents(root) == ["one", "two", "three"]  # each once
        add(JsonDirStore(root), "s", "four")
        assert contents(root) == ["one", "two", "three", "four"]

    def test_killed_while_creating_a_log(self, store: JsonDirStore, root: Path) -> None:
        add(store, "s", "one")
        _, log = paths(root)
        log.write_bytes(b'{"format": "engram.session-log", "gener')  # a torn header
        assert contents(root) == ["one"]
        add(JsonDirStore(root), "s", "two")
        assert contents(root) == ["one", "two"]

    def test_a_failed_append_leaves_nothing(
        self, store: JsonDirStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        add(store, "s", "one")
        add(store, "s", "two")

        def full(fd: int) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(jsondir_log, "_sync", full)
        with pytest.raises(engram.StoreError):
            add(store, "s", "refused")
        monkeypatch.undo()
        assert contents(root) == ["one", "two"]
        add(store, "s", "three")
        assert contents(root) == ["one", "two", "three"]

    def test_damage_inside_the_log_is_reported_and_set_aside(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "one")
        add(store, "s", "two")
        add(store, "s", "three")
        _, log = paths(root)
        lines = log.read_bytes().split(b"\n")
        lines[1] = b"{not json"
        log.write_bytes(b"\n".join(lines))
        with pytest.raises(CorruptedData, match="moved aside"):
            JsonDirStore(root).page("p", "s")
        assert [p.name for p in log.parent.glob("s.jsonl.corrupt-*")]
        assert contents(root) == ["one"]  # the document's part; the rest is kept aside


class TestIdsAfterACrash:
    def test_a_power_loss_resumes_above_the_reserved_ids(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "one", "two", "three")
        live = root / jsondir_ids.LIVE_COUNTERS
        # After a power loss the unsynced live file may hold an old value; the boot differs.
        live.write_text(json.dumps({"boot": "another boot", "last": {"message": 1}}))
        (new,) = add(JsonDirStore(root), "s", "four")
        assert new > 3
        assert contents(root) == ["one", "two", "three", "four"]

    def test_counters_moved_by_an_older_engram_are_respected(
        self, store: JsonDirStore, root: Path
    ) -> None:
        add(store, "s", "one")
        ceilings = json.loads((root / jsondir_ids.COUNTERS).read_text())
        # An older Engram knew only .counters.json: it took ids up to its value + 5.
        (root / jsondir_ids.COUNTERS).write_text(json.dumps({"message": ceilings["message"] + 5}))
        (new,) = add(JsonDirStore(root), "s", "two")
        assert new > ceilings["message"] + 5

    def test_a_lost_live_file_resumes_above_the_reserved_ids(
        self, store: JsonDirStore, root: Path
    ) -> None:
        first = add(store, "s", "one", "two")
        (root / jsondir_ids.LIVE_COUNTERS).unlink()
        assert add(JsonDirStore(root), "s", "three")[0] > max(first)

    def test_ids_need_no_fsync_until_the_reserve_is_used(
        self, store: JsonDirStore, root: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        if jsondir_ids.BOOT is None:
            pytest.skip("no boot id on this system: every draw is synced")
        monkeypatch.setattr(jsondir_ids, "RESERVE", 10)
        seen = add(store, "s", "first")
        counters = root / jsondir_ids.COUNTERS
        written = counters.read_bytes()
        ceiling = json.loads(written)["message"]
        assert ceiling == seen[0] + 10
        seen += [add(store, "s", f"m{i}")[0] for i in range(10)]
        assert seen[-1] == ceiling and counters.read_bytes() == written  # inside the reserve
        seen += add(store, "s", "crosses")
        assert json.loads(counters.read_text())["message"] == ceiling + 11
        assert seen == sorted(set(seen))


@settings(max_examples=30, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(1, 3)),
            st.tuples(st.just("state"), st.just(0)),
            st.tuples(st.just("delete"), st.integers(0, 20)),
            st.tuples(st.just("torn"), st.just(0)),
            st.tuples(st.just("reopen"), st.just(0)),
        ),
        max_size=25,
    )
)
def test_any_sequence_reads_back_as_written(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    root = tmp_path_factory.mktemp("seq") / "ctx"
    store = JsonDirStore(root)
    expected: list[tuple[int, str]] = []
    version = 0
    for step, n in steps:
        if step == "add":
            texts = [f"m{len(expected) + k}" for k in range(n)]
            expected += zip(add(store, "s", *texts), texts, strict=True)
        elif step == "state":
            assert store.save_state("p", "s", "k", {"v": version}, expected_version=version)
            version += 1
        elif step == "delete" and expected:
            gone = expected.pop(n % len(expected))
            assert [m.id for m in store.delete_messages("p", "s", [gone[0]])] == [gone[0]]
        elif step == "torn" and paths(root)[1].exists():
            with paths(root)[1].open("ab") as handle:
                handle.write(b'{"at": "x", "messa')
        elif step == "reopen":
            store = JsonDirStore(root)
    if expected or store.get_session("p", "s") is not None:
        assert contents(root) == [text for _, text in expected]
        rows = JsonDirStore(root).page("p", "s", limit=1000)
        assert [m.id for m in rows] == [i for i, _ in expected]


class TestDirectoryWrittenBeforeLogs:
    @pytest.fixture
    def old(self, tmp_path: Path) -> Path:
        copy = tmp_path / "old"
        shutil.copytree(OLD_DIRECTORY, copy)
        return copy

    def test_it_opens_and_reads_as_before(self, old: Path) -> None:
        with engram.open(f"jsondir://{old}", llm=None) as mem:
            assert mem.scopes() == ["apollo", "phoenix"]
            chat = mem.session("user:agent:1", scope="phoenix")
            rows = chat.messages()
            assert [m.role for m in rows] == ["user", "assistant", "assistant", "tool"]
            assert rows[2].tool_calls and rows[3].tool_call_id == "c1"
            other = mem.session("other", scope="phoenix").messages()
            assert other[0].content == "line\u2028separator and \r carriage"
            assert other[0].metadata == {"k": [1]}
            assert [m.content for m in mem.memories("phoenix").list()] == ["prefers short answers"]
            assert chat.search("pricing")
            state = mem.store.load_state("phoenix", "user:agent:1", "compaction")
            assert state is not None and state.data["summary"] == "Pricing is flat."

    def test_it_takes_new_messages_with_higher_ids(self, old: Path) -> None:
        with engram.open(f"jsondir://{old}", llm=None) as mem:
            chat = mem.session("user:agent:1", scope="phoenix")
            before = [m.id for m in chat.messages()]
            added = [chat.add("user", f"new {i}").id for i in range(3)]
            assert min(added) > 6  # .counters.json said 6 was the last id
            assert [m.id for m in chat.messages()] == before + added
            memory = mem.store.add_memory("phoenix", "likes tea")
            assert memory.id > 1
        assert (old / "phoenix" / "sessions" / "user%3Aagent%3A1.jsonl").exists()


def test_readers_never_see_messages_vanish_while_logs_fold(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsondir_log, "FOLD_MIN_BYTES", 0)  # fold as often as possible
    writer, folder, reader = JsonDirStore(root), JsonDirStore(root), JsonDirStore(root)
    add(writer, "s", "start")
    done = threading.Event()
    problems: list[str] = []

    def write(name: str) -> None:
        for i in range(60):
            add(writer, "s", f"{name} {i}")

    def fold() -> None:
        version = 0
        while not done.is_set():
            folder.save_state("p", "s", "k", {"v": version}, expected_version=version)
            version += 1

    def read() -> None:
        seen = 0
        while not done.is_set():
            rows = reader.page("p", "s", limit=1000)
            ids = [m.id for m in rows]
            if ids != sorted(set(ids)) or len(rows) < seen:
                problems.append(f"{len(rows)} rows after {seen}: {ids[-5:]}")
            seen = len(rows)

    writers = [threading.Thread(target=write, args=(n,)) for n in ("a", "b")]
    others = [threading.Thread(target=fold), threading.Thread(target=read)]
    for thread in writers + others:
        thread.start()
    for thread in writers:
        thread.join(timeout=60)
    done.set()
    for thread in others:
        thread.join(timeout=60)
    assert not problems, problems[:3]
    assert len(contents(root)) == 121
