"""The flagging benchmark runs and reports both error rates on both sets."""

from __future__ import annotations

from benchmarks import flagging


def test_the_report_has_both_rates_for_both_sets() -> None:
    results = flagging.run()
    for name in ("tuned", "held_out"):
        r = results[name]
        assert r["instruction_texts"] > 0 and r["ordinary_texts"] > 0
        assert r["missed"] == len(r["missed_texts"])
        assert r["false_flags"] == len(r["false_flag_texts"])
    report = flagging.markdown(results)
    assert "| tuned |" in report and "| held out |" in report and "µs per corpus text" in report
