"""``python -m engram.cli``: the same as the ``engram`` command."""

from engram.cli import main

main()
