"""``engram serve --workers N``: N server processes on one port, each with its own Engram.

One process runs Python one thread at a time, so a single server uses about
one core however many requests wait. Several uvicorn workers share the
listening socket and each opens the store itself: on PostgreSQL they share
the database (and its job queue, so background work runs once), which is the
way to use more cores, and more machines, with the same data. SQLite works too
(WAL: readers in parallel, one writer at a time, waiting up to the busy
timeout), on one machine.

uvicorn starts each worker as a fresh process that imports the app by name,
so :func:`run` hands the store URL and the server settings over in an
environment variable, and :func:`worker_app` builds the app from it.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import os
import pickle

from fastapi import FastAPI

from engram.server.settings import ServerSettings

#: The environment variable that carries the store URL and settings to the workers.
WORKER_ENV = "ENGRAM_SERVE_WORKER"


def run(
    url: str, settings: ServerSettings, *, host: str, port: int, workers: int, log_level: str
) -> None:
    """Serve with ``workers`` processes until stopped (uvicorn's own supervisor)."""
    import uvicorn

    settings = per_worker(settings, workers)
    # Our own object, to our own child processes, through their environment.
    os.environ[WORKER_ENV] = base64.b64encode(pickle.dumps((url, settings))).decode("ascii")
    uvicorn.run(
        "engram.server.workers:worker_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=False,
    )


def per_worker(settings: ServerSettings, workers: int) -> ServerSettings:
    """``settings`` for one of ``workers`` processes: the key-failure limit shared out.

    Each process counts the failed key checks it sees, and a client's connections
    land on any of them: with the whole limit each, a client could fail ``workers``
    times as often before a 429. With a share each, all of them together allow at
    most the limit rounded up to a multiple of ``workers``.
    """
    if workers <= 1 or settings.key_failures <= 0:
        return settings
    share = -(-settings.key_failures // workers)  # rounded up: never 0 (0 turns it off)
    return dataclasses.replace(settings, key_failures=share)


def worker_app() -> FastAPI:
    """The app of one worker: its own Engram on the store :func:`run` named."""
    import engram
    from engram.server.app import create_app

    url, settings = pickle.loads(base64.b64decode(os.environ[WORKER_ENV]))
    mem = engram.open(url)
    atexit.register(mem.close)  # the worker closes its store as it exits
    return create_app(mem, settings)
