"""Time bounds: a hung model never holds a turn past the compaction deadline, nor close()."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from engram.config import Config
from engram.engine import Engram
from engram.llm import LLMClient
from engram.testing import FakeLLMServer, FakeResponse

#: The model answers after this long (hung, as far as a turn is concerned).
HUNG = 6.0


def _hung_client(fake: FakeLLMServer) -> LLMClient:
    fake.default = lambda request: FakeResponse(content='{"summary": "late"}', delay=HUNG)
    return LLMClient("gpt-4o-mini", base_url=fake.base_url, timeout=30, backoff=0.01)


def _fill(mem: Engram, session: str, words: int = 4000) -> None:
    chat = mem.session(session, policy="summary_buffer")
    for i in range(12):
        chat.add("user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * (words // 12))


def test_sync_compaction_gives_up_at_its_deadline_and_the_turn_goes_on(
    open_engram: Callable[..., Engram], fake_llm: FakeLLMServer
) -> None:
    with _hung_client(fake_llm) as client:
        config = Config.from_env(compaction_deadline=0.5)
        mem = open_engram(llm=client, config=config)
        _fill(mem, "s")
        started = time.monotonic()
        ctx = mem.session("s").context(budget=4000)
        took = time.monotonic() - started
        # Far less than the model's delay (and the 121 s a hung model used to cost).
        assert took < HUNG / 2
        assert ctx.pending_compaction is True
        assert any("deadline" in note for note in ctx.notes)
        assert ctx.tokens <= 4000
        # The next turn does not start a second compaction while the first runs.
        before = len(fake_llm.requests)
        mem.session("s").context(budget=4000)
        assert len(fake_llm.requests) == before
        assert mem.close(timeout=0.2) is False  # the hung call is abandoned, not awaited


def test_close_after_end_is_bounded(
    open_engram: Callable[..., Engram], fake_llm: FakeLLMServer
) -> None:
    with _hung_client(fake_llm) as client:
        mem = open_engram(llm=client)
        chat = mem.session("s")
        chat.add("user", "Please remember that I prefer tea over coffee in the mornings.")
        chat.add("assistant", "Noted: tea in the mornings.")
        chat.end("done")
        deadline = time.monotonic() + 5
        while not fake_llm.requests and time.monotonic() < deadline:
            time.sleep(0.01)  # the memory worker has called the (hung) model
        started = time.monotonic()
        assert mem.close(timeout=0.3) is False
        assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ENGRAM_COMPACTION_DEADLINE": "soon"}, "ENGRAM_COMPACTION_DEADLINE"),
        ({"ENGRAM_CLOSE_TIMEOUT": "-1"}, "ENGRAM_CLOSE_TIMEOUT"),
        ({"ENGRAM_MEMORY_CAP": "0"}, "ENGRAM_MEMORY_CAP"),
        ({"ENGRAM_RUN_JOBS": "maybe"}, "ENGRAM_RUN_JOBS"),
        ({"ENGRAM_TZ": "Mars/Olympus"}, "ENGRAM_TZ"),
    ],
)
def test_bad_settings_name_their_variable(env: dict[str, str], message: str) -> None:
    from engram.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        Config.from_env(env)


def test_settings_read_from_the_environment_and_overridden_by_arguments() -> None:
    env = {"ENGRAM_URL": "sqlite:///a.db", "ENGRAM_TZ": "Europe/Paris", "ENGRAM_RUN_JOBS": "no"}
    config = Config.from_env(env)
    assert (config.url, config.tz, config.run_jobs) == ("sqlite:///a.db", "Europe/Paris", False)
    assert Config.from_env(env, url="sqlite:///b.db").url == "sqlite:///b.db"
    assert Config.from_env({}).url == "sqlite:///./engram.db"


def test_a_compaction_that_finishes_before_its_callback_is_added_does_not_deadlock(
    open_engram: Callable[..., Engram],
) -> None:
    """Regression: the in-flight bookkeeping ran its done-callback under its own lock."""
    import threading
    from concurrent.futures import Future

    mem = open_engram(llm=None)
    _fill(mem, "s")
    runtime = mem.runtime

    class Immediate:
        """An executor whose futures are done before submit returns."""

        def submit(self, fn: Callable[..., object], *args: object, **kwargs: object) -> Future:
            future: Future = Future()
            future.set_result(fn(*args, **kwargs))
            return future

        def shutdown(self, *args: object, **kwargs: object) -> None:
            return None

    pool = runtime._sync  # the deadline pool of background/
    real = pool._executor
    pool._executor = Immediate()  # type: ignore[assignment]
    outcome: list[object] = []
    worker = threading.Thread(
        target=lambda: outcome.append(
            runtime.compact_within("default", "s", mem.session("s").policy)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=10)
    pool._executor = real
    assert not worker.is_alive(), "compact_within deadlocked"
    assert outcome and outcome[0] is not None
    assert pool._inflight == {}
