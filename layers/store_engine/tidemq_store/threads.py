"""Background threads that carry the context they were started in.

A thread made with `threading.Thread` starts with an empty `contextvars` context. The engine's background threads
(flusher, maintenance, tier dispatcher, KV purger) start with a copy of their creator's instead. So whatever a
host sets while it opens a store reaches that store's threads. The BrokerContainer, for one, sets the broker's
identity, and its log lines follow the broker into the broker's own file.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any


def background_thread(target: Callable[..., Any], name: str, args: tuple = ()) -> threading.Thread:
    """A daemon thread (not yet started) that runs `target(*args)` in a copy of the current context."""
    context = contextvars.copy_context()
    return threading.Thread(target=context.run, args=(target, *args), name=name, daemon=True)
