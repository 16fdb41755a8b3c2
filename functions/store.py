"""The one `MessageStore` of this process: a Lambda execution environment or the local gateway.

Handlers hold no state between calls; the store is opened on first use and reused by every
invocation the environment serves (as RIP-20's stateless compute reuses its storage client).
"""

from __future__ import annotations

import atexit
import threading

from shared import local_aws
from shared.settings import get_settings
from tidemq_store import Backend, MessageStore, TierMedium, open_store

_lock = threading.Lock()
_store: MessageStore | None = None


def get_store() -> MessageStore:
    global _store
    if _store is None:
        with _lock:
            if _store is None:
                settings = get_settings()
                if settings.tier is TierMedium.S3 or settings.backend is Backend.SERVERLESS:
                    # S3 or DynamoDB wanted, and no AWS_ENDPOINT_URL: an embedded moto server
                    local_aws.start_if_needed()
                _store = open_store(settings)
                atexit.register(_store.close)
    return _store


def close_store() -> None:
    """Close the store (the local gateway calls this on shutdown)."""
    global _store
    with _lock:
        if _store is not None:
            _store.close()
            atexit.unregister(_store.close)
            _store = None
