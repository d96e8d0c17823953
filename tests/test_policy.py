from __future__ import annotations

import dataclasses
import json

import pytest

from engram.errors import ConfigError
from engram.policy import PRESETS, Policy, get_policy, policy_json_schema


class TestPresets:
    def test_every_seed_has_its_preset(self) -> None:
        assert set(PRESETS) == {
            "default",
            "lean",
            "full_recall",
            "summary_buffer",
            "agent_state",
            "exchanges",
        }
        for name, policy in PRESETS.items():
            assert policy.name == name

    def test_default_has_no_window_limit(self) -> None:
        policy = PRESETS["default"]
        assert policy.max_messages is None
        assert policy.max_window_tokens is None
        assert policy.max_exchanges is None
        assert policy.summarize_over_tokens is None

    def test_lean_is_last_12_messages_about_20k_tokens(self) -> None:
        policy = PRESETS["lean"]
        assert policy.max_messages == 12
        assert policy.max_window_tokens == 20_000
        assert policy.summarize_over_tokens is None  # seed 000: no summarization

    def test_full_recall_is_55k_then_summarize(self) -> None:
        policy = PRESETS["full_recall"]
        assert policy.max_window_tokens == 55_000
        assert policy.summarize_over_tokens == 55_000
        assert policy.max_messages is None
        assert policy.default_budget >= 55_000

    def test_summary_buffer_is_3000_keep_2500_synchronous(self) -> None:
        policy = PRESETS["summary_buffer"]
        assert policy.summarize_over_tokens == 3_000
        assert policy.keep_tokens == 2_500
        assert policy.sync_compaction is True

    def test_agent_state_is_50_keep_30_fold_over_100k(self) -> None:
        policy = PRESETS["agent_state"]
        assert (policy.max_history_messages, policy.keep_messages) == (50, 30)
        assert policy.fold_over_tokens == 100_000

    def test_exchanges_is_10_exchanges_and_byte_views(self) -> None:
        policy = PRESETS["exchanges"]
        assert policy.max_exchanges == 10
        assert (policy.answer_over_bytes, policy.answer_view_bytes) == (750, 500)
        assert (policy.summary_max_bytes, policy.summary_target_bytes) == (4096, 3072)


class TestGetPolicy:
    def test_none_is_default(self) -> None:
        assert get_policy(None) is PRESETS["default"]

    def test_by_name(self) -> None:
        assert get_policy("lean") is PRESETS["lean"]

    def test_policy_passes_through(self) -> None:
        custom = Policy(name="mine", max_messages=3)
        assert get_policy(custom) is custom

    def test_unknown_name_lists_presets(self) -> None:
        with pytest.raises(ConfigError) as info:
            get_policy("leen")
        message = str(info.value)
        assert "'leen'" in message
        for name in PRESETS:
            assert name in message

    def test_dict_with_preset_name_overrides_fields(self) -> None:
        policy = get_policy({"name": "lean", "max_messages": 20})
        assert policy.max_messages == 20
        assert policy.max_window_tokens == 20_000  # kept from the preset

    def test_dict_override_is_validated_after_merging(self) -> None:
        # Alone this reserve would exceed the default budget; merged with lean it is fine.
        assert get_policy({"name": "lean", "default_reserve": 9_000}).default_reserve == 9_000
        with pytest.raises(ConfigError, match="keep_tokens"):
            get_policy({"name": "summary_buffer", "keep_tokens": 3_000})

    def test_dict_with_new_name_is_custom(self) -> None:
        policy = get_policy({"name": "mine", "max_exchanges": 4})
        assert policy.name == "mine"
        assert policy.max_exchanges == 4
        assert policy.max_messages is None

    def test_dict_with_unknown_field_is_refused(self) -> None:
        with pytest.raises(ConfigError, match="max_mesages"):
            get_policy({"name": "lean", "max_mesages": 3})
        with pytest.raises(ConfigError, match="max_mesages"):
            get_policy({"name": "mine", "max_mesages": 3})

    def test_other_types_are_refused(self) -> None:
        with pytest.raises(ConfigError, match="preset name"):
            get_policy(12)  # type: ignore[arg-type]


class TestRoundTrip:
    @pytest.mark.parametrize("name", sorted(PRESETS))
    def test_presets_survive_json(self, name: str) -> None:
        policy = PRESETS[name]
        again = Policy.from_dict(json.loads(json.dumps(policy.to_dict())))
        assert again == policy

    def test_to_dict_has_every_field(self) -> None:
        data = PRESETS["exchanges"].to_dict()
        assert data["max_exchanges"] == 10
        assert data["sync_compaction"] is False
        assert "fold_over_tokens" in data

    def test_from_dict_refuses_non_mapping(self) -> None:
        with pytest.raises(ConfigError, match="JSON object"):
            Policy.from_dict(["lean"])  # type: ignore[arg-type]

    def test_replace(self) -> None:
        policy = PRESETS["lean"].replace(max_messages=30)
        assert policy.max_messages == 30
        assert PRESETS["lean"].max_messages == 12
        with pytest.raises(ConfigError, match="nope"):
            PRESETS["lean"].replace(nope=1)


class TestValidation:
    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("max_messages", 0),
            ("max_messages", -3),
            ("max_messages", True),
            ("max_window_tokens", 1.5),
            ("max_exchanges", "10"),
            ("keep_tokens", 0),
            ("answer_view_bytes", -1),
        ],
    )
    def test_limits_must_be_positive_integers(self, field: str, value: object) -> None:
        with pytest.raises(ConfigError, match=field):
            Policy(name="bad", **{field: value})  # type: ignore[arg-type]

    def test_budget_and_reserve(self) -> None:
        with pytest.raises(ConfigError, match="default_budget"):
            Policy(default_budget=0)
        with pytest.raises(ConfigError, match="default_reserve"):
            Policy(default_reserve=-1)
        with pytest.raises(ConfigError, match="below default_budget"):
            Policy(default_budget=1000, default_reserve=1000)

    @pytest.mark.parametrize(
        ("small", "large"),
        [
            ("keep_tokens", "summarize_over_tokens"),
            ("keep_messages", "max_history_messages"),
            ("answer_view_bytes", "answer_over_bytes"),
            ("summary_target_bytes", "summary_max_bytes"),
        ],
    )
    def test_keep_must_be_below_trigger(self, small: str, large: str) -> None:
        with pytest.raises(ConfigError, match=small):
            Policy(name="bad", **{small: 100, large: 100})
        assert getattr(Policy(name="ok", **{small: 99, large: 100}), small) == 99

    def test_name_and_flag_types(self) -> None:
        with pytest.raises(ConfigError, match="name"):
            Policy(name="  ")
        with pytest.raises(ConfigError, match="sync_compaction"):
            Policy(sync_compaction=1)  # type: ignore[arg-type]

    def test_frozen(self) -> None:
        with pytest.raises(AttributeError):
            PRESETS["lean"].max_messages = 99  # type: ignore[misc]


def test_a_whole_number_sent_as_json_float_is_an_integer() -> None:
    # JSON does not tell 20.0 from 20, and the API document calls both integers.
    assert get_policy({"name": "lean", "max_messages": 20.0}).max_messages == 20
    assert get_policy({"name": "x", "default_budget": 4000.0}).default_budget == 4000
    with pytest.raises(ConfigError, match="max_messages"):
        get_policy({"name": "x", "max_messages": 20.5})


def test_the_json_schema_names_every_field_and_preset() -> None:
    preset, custom = policy_json_schema()["anyOf"]
    assert preset["enum"] == sorted(PRESETS)
    assert set(custom["properties"]) == {f.name for f in dataclasses.fields(Policy)}
