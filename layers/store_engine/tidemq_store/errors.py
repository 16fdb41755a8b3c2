"""The store engine's own errors: states of an open store that no request causes and no client is told by name.

Every error a request can cause, and every error that crosses the wire, is in `tidemq_protocol.errors`.
"""

from __future__ import annotations

from tidemq_protocol.errors import TideMQError


class StoreClosed(TideMQError):
    """The store was closed; open a new one."""


class StoreLocked(TideMQError):
    """Another process has this store open."""
