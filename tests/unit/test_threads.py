"""The engine's background threads start in a copy of their creator's context (tidemq_store/threads.py): what a
host sets while it opens a store, a BrokerContainer's broker identity for one, reaches the store's threads."""

from __future__ import annotations

import contextvars

from tidemq_store.threads import background_thread

who: contextvars.ContextVar[str | None] = contextvars.ContextVar("who", default=None)


def test_a_background_thread_sees_what_its_creator_had_set():
    seen = []
    token = who.set("broker-a")
    thread = background_thread(lambda suffix: seen.append(f"{who.get()}{suffix}"), "t", ("!",))
    who.reset(token)
    thread.start()
    thread.join()
    assert seen == ["broker-a!"]
    assert thread.daemon and thread.name == "t"
    assert who.get() is None  # the creator's own context is its own
