"""The in-memory backend (``memory://NAME``): the contract's reference, for tests and demos."""
