"""The one `MessageStore` of this process: a Lambda execution environment or the local gateway.

Handlers hold no state between calls; the store is opened on first use and reused by every
invocation the environment serves (as RIP-20's stateless compute reuses its storage client).
"""

from __future__ import annotations

import atexit
import threading

from shared import local_aws
from shared.local_aws import AwsEndpoint
from shared.settings import get_settings
from tidemq_store import Backend, MessageStore, TierMedium, open_store

_lock = threading.Lock()
_store: MessageStore | None = None
_aws: AwsEndpoint | None = None


def get_store() -> MessageStore:
    """The process's store, opened on first use. S3 or DynamoDB are looked for where the settings say
    (`local_aws.connect`): a misconfiguration fails here, at start-up, saying what to change."""
    global _store, _aws
    if _store is None:
        with _lock:
            if _store is None:
                settings = get_settings()
                if settings.tier is TierMedium.S3 or settings.backend is Backend.SERVERLESS:
                    _aws = local_aws.connect(settings.local_aws, settings.home)
                _store = open_store(settings)
                atexit.register(_store.close)
    return _store


def aws_endpoint() -> AwsEndpoint | None:
    """Where this process reaches S3 and DynamoDB, once a store that needs them is open (None: it needs neither)."""
    return _aws


def close_store() -> None:
    """Close the store (the local gateway calls this on shutdown)."""
    global _store
    with _lock:
        if _store is not None:
            _store.close()
            atexit.unregister(_store.close)
            _store = None
