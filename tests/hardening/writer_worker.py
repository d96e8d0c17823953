"""A writer process for the durability and concurrency probes (run by test_durability).

Usage: python writer_worker.py URL NAME COUNT. Adds COUNT messages "NAME k"
to session NAME and to session "shared" of scope "probe", alternately, and
prints "ack NAME k" after each add returns (the message is then durable).
"""

from __future__ import annotations

import sys


def main(url: str, name: str, count: int) -> None:
    import engram

    mem = engram.open(url, llm=None)
    own = mem.session(name, scope="probe")
    shared = mem.session("shared", scope="probe")
    print("ready", flush=True)
    for k in range(count):
        (shared if k % 2 else own).add("user", f"{name} {k}")
        print(f"ack {name} {k}", flush=True)
    mem.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
