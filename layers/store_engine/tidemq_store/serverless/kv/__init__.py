"""The serverless backend's KV namespaces (the RIP-22 thread), in three DynamoDB tables (tables.py):

    namespaces.py  `kv_namespaces`: a namespace's settings and revision, and the hold a restore or a deletion puts on it
    keys.py        `kv_entries`: its keys, read, and written by one transaction each (below)
    changes.py     `kv_changes`: its history, as watches read it
    restore.py     a snapshot imported into a namespace
    store.py       `ServerlessKeyValueStore`: the KeyValueStore interface over those

A write (put or delete) reads the namespace item, strongly consistent, for its revision r, then makes ONE
TransactWriteItems of three items:

    1. the entry      put or delete, on the caller's condition (absent or expired / at version v / live)
    2. the change     put `kv_changes` item r+1 (kind, key, value, version, expires_at_ms, previous = r)
    3. the namespace  SET revision = r+1, condition revision = r and no restore or deletion holds it

A failed condition on 3 means another writer took revision r+1 first: read again and retry, with jittered
backoff, a bounded number of times (then StoreUnavailable, nothing written). A failed condition on 1 is the
caller's: read the key (strongly) and, unless it has meanwhile become what the write asks for, raise
VersionMismatch with its version, or KeyNotFound (also when 3 failed too: the key refuses the write as it is now).
A request the SDK resends never writes twice: each attempt carries its own ClientRequestToken, so DynamoDB
answers a resent one as it answered the first. The token is also the change item's `writer`: a transaction that
landed and whose answer was lost, sent again by botocore where no token is honoured (the moto server), fails its
conditions, finds its own change at its revision, and answers as written, not as a conflict.

Why a namespace's writes are serialized: they take revisions one at a time, so revisions are dense, and a change
item r exists exactly when the namespace's revision is r or more (one transaction makes both or neither). A watch
therefore reads the revision R, then the change items up to R, and knows that a missing one is a change gone (its
history expired: RevisionCompacted), never one still on its way: watches lose nothing, with no clock and no
ordering guess. The cost: one namespace takes one write at a time, a read and a transaction each (some tens of
writes a second, fewer when many writers contend and retry, however many Lambdas write), and every write of a
namespace goes through its one item. Namespaces are independent: spread write-hot data over several.

Reads are strongly consistent and read the namespace item first: what a read returns reflects at least every
change up to the revision it reports, so "read, then watch from revision + 1" misses nothing. Expired keys and
changes read as absent from their expiry on (`expires_at_ms`; a change's `purge_at`, the namespace's history_ms
after it); DynamoDB's TTL deletes their items later (`purge_at`, usually within days).

A restore or a deletion holds the namespace (`busy`, `busy_token`, `busy_since` on its item) while it runs, since
both write many items outside transactions: writes wait for the hold (then StoreUnavailable), and a namespace
being deleted reads as missing. A restore writes its change items before its entries and moves the revision last,
so whatever a failed one leaves is above the revision, where the next restore finds and removes it. A hold older
than BUSY_ABANDONED_MS lost its holder (a process that died) and is taken over: a deletion by whoever deletes or
creates the namespace again, a restore by another restore or a deletion.
"""

from .store import ServerlessKeyValueStore

__all__ = ["ServerlessKeyValueStore"]
