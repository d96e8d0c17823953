"""Settings are declared once, as fields of Config, and read from their variables."""

from __future__ import annotations

from dataclasses import fields

import pytest

from engram.config import SETTINGS, Config
from engram.errors import ConfigError


def test_every_field_is_a_setting_read_from_its_own_variable() -> None:
    assert list(SETTINGS) == [f.name for f in fields(Config)]
    env = {
        "ENGRAM_URL": "memory://settings",
        "ENGRAM_TZ": "Europe/Paris",
        "ENGRAM_MEMORY_CAP": "3",
        "ENGRAM_RUN_JOBS": "false",
        "ENGRAM_EMBEDDINGS": "true",
        "ENGRAM_CLOSE_TIMEOUT": "2.5",
        "ENGRAM_COMPACTION_DEADLINE": "1",
        "ENGRAM_PROXY_BUDGET": "20000",
        "ENGRAM_PROXY_MAX_ROUNDS": "2",
        "ENGRAM_PROXY_RETRY_WINDOW": "0",
        "ENGRAM_PROXY_SINGLE_SYSTEM": "yes",
        "ENGRAM_FLAGGED_TEXT": "keep:lab",
    }
    assert sorted(s.env for s in SETTINGS.values()) == sorted(env)
    assert Config.from_env(env) == Config(
        url="memory://settings",
        tz="Europe/Paris",
        memory_cap=3,
        run_jobs=False,
        embeddings=True,
        close_timeout=2.5,
        compaction_deadline=1.0,
        proxy_budget=20_000,
        proxy_max_rounds=2,
        proxy_retry_window=0.0,
        proxy_single_system=True,
        flagged_text="keep:lab",
    )
    assert Config.from_env({}) == Config()


def test_a_bad_value_names_its_variable_and_code_values_are_checked_alike() -> None:
    with pytest.raises(ConfigError, match="ENGRAM_MEMORY_CAP"):
        Config.from_env({"ENGRAM_MEMORY_CAP": "0"})
    with pytest.raises(ConfigError, match="memory_cap"):
        Config().replace(memory_cap=0)
    with pytest.raises(ConfigError, match="unknown setting"):
        Config.from_env({}, colour="blue")
