"""Fixtures: ``fake_llm`` and ``client`` come from tests/conftest.py."""
