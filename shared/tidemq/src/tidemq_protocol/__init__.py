"""What TideMQ's client and server both speak, owned once: each module is the one place its part is defined.

    errors          every error that crosses the wire, by the name its JSON body carries
    names, limits   topic and group names, time units, queue counts, a put's default bounds
    attributes      a topic's or group's attributes, and the ones TideMQ reads (TopicPolicy)
    message         Message, StoredMessage, MessageType
    filter          what a subscription selects: a tag filter or a SQL92 expression over properties
    record          the commit-log record format (what a producer encodes and the broker appends as it is)
    codec           the HTTP API's binary batch encodings
    signing         how a request is signed
    acl             ACL 2.0's vocabulary: user types, actions, resources, policy entries
    push, push_target, push_signature
                    a push subscription's spec, how its target is written, how a delivery is signed
    kv, kv_snapshot KV namespaces' rules and records, and the snapshot file
    clock           wall-clock milliseconds, as timestamps are stored
    api/            the HTTP API's JSON bodies, one module per area

Nothing here imports the SDK or any server code (an import-linter contract).
"""
