"""KV namespaces on the broker (the RIP-22 thread): the `KeyValueStore` interface every backend implements (api.py;
`embedded/kv.py`, `serverless/kv.py`) and the format of a change as a message of a namespace's topic (record.py).
What a namespace holds and the snapshot file are `tidemq_protocol.kv` and `tidemq_protocol.kv_snapshot`."""

from .api import KeyValueStore

__all__ = ["KeyValueStore"]
