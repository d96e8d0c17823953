"""Provenance of prompts: each recorded turn's recipe, its replay, diffs and what-ifs.

* :mod:`.digest`: the bytes of a prompt as sent, their SHA-256, shared prefixes;
* :mod:`.recipe`: what a turn keeps to rebuild its prompt (pure);
* :mod:`.writer`: recipes written in the prompt recorder's batches, provider usage;
* :mod:`.retention`: which recipes, state versions and texts are kept;
* :mod:`.replay`: a recorded turn rebuilt from the store, checked against its SHA-256;
* :mod:`.turns`: the list of recorded turns with their cacheable share;
* :mod:`.diff`: what changed between two recorded turns;
* :mod:`.whatif`: the stored history played again under another policy, writing nothing.

This package's ``__init__`` imports nothing, so the runtime can use
:mod:`.writer` and :mod:`.retention` while :mod:`.whatif` sits above the engine.
"""
