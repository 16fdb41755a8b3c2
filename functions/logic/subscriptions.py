"""A group's push subscription: set, show, clear (the admin side of push delivery).

Setting one checks what can be checked before any delivery, and refuses the subscription, storing nothing, when a check
fails: the group and topic exist, its SQL92 filter parses, the dead-letter topic's name is valid, the target is written
as one and is allowed (`targets.TargetRules`: a Python target on the operator's allow-list, which imports; a webhook at
an allowed address, which answers a signed ping with anything but a redirect). A webhook subscription gets a new signing
secret, returned in the answer to this request only. A change is told to the
`PushNotifier` the caller gives, which sets delivery going for what the group has waiting, from its committed
offsets (each queue's oldest message if it has none).

A subscription is shown without its secret and with credentials in its target redacted
(`tidemq_protocol.api.groups.ShownPush`).
"""

from __future__ import annotations

from tidemq_protocol.api.push import GroupPush, PushPing, PushSubscribed
from tidemq_protocol.errors import InvalidArgument, NoPushSubscription, TopicNotFound
from tidemq_protocol.filter import SqlFilter
from tidemq_protocol.names import check_name
from tidemq_protocol.push import PushSpec
from tidemq_protocol.push_signature import new_signing_secret
from tidemq_protocol.push_target import PushTargetKind
from tidemq_store import MessageStore
from tidemq_store.model import PushSubscription

from .notifier import PushNotifier
from .push import dead_letter_topic
from .push_retries import PushRetries
from .targets import TargetRules, check_target, ping_webhook


def show_push(store: MessageStore, group: str) -> GroupPush:
    """The group's push subscription, or NoPushSubscription if it is pulled from (none set, or cleared)."""
    config = store.get_group(group)
    if config.push is None:
        raise NoPushSubscription(group)
    return GroupPush(group=config.name, push=config.push, dead_letter_topic=dead_letter_topic(config.name))


def set_push(
    store: MessageStore, group: str, spec: PushSpec, notifier: PushNotifier, rules: TargetRules
) -> PushSubscribed:
    """Make `group` a push group (replacing any subscription it had), and tell `notifier`; nothing changes
    (and nothing is told) if a check fails."""
    config = store.get_group(group)
    store.get_topic(spec.topic)
    dead_letters = dead_letter_topic(group)
    try:
        check_name("dead-letter topic", dead_letters)
    except InvalidArgument as error:
        raise InvalidArgument(f"group {group!r} cannot push: {error}") from None
    if spec.topic == dead_letters:
        raise InvalidArgument(f"group {group!r} cannot push from its own dead-letter topic {dead_letters!r}")
    if spec.sql is not None:
        SqlFilter.parse(spec.sql)  # InvalidFilterExpression (400, with the position) for one that does not parse
    secret = None
    if check_target(spec.target, rules) is PushTargetKind.HTTP:
        secret = new_signing_secret()
        ping_webhook(spec.target, PushPing(group=group, topic=spec.topic), secret, rules)
    record = PushSubscription(**spec.model_dump(), signing_secret=secret)  # the store's record
    updated = store.update_group(config.model_copy(update={"push": record}))
    if config.push is not None and config.push.topic != spec.topic:
        _forget_retries(store, group, config.push.topic)
    notifier.subscription_changed(group, spec.topic)
    return PushSubscribed(group=group, push=updated.push, dead_letter_topic=dead_letters, signing_secret=secret)


def clear_push(store: MessageStore, group: str, notifier: PushNotifier) -> None:
    """Stop pushing to `group` (it keeps its offsets, for pulling or a later subscription), and tell `notifier`
    if it was pushed to."""
    config = store.get_group(group)
    if config.push is not None:
        store.update_group(config.model_copy(update={"push": None}))
        _forget_retries(store, group, config.push.topic)
        notifier.subscription_changed(group, None)


def _forget_retries(store: MessageStore, group: str, topic: str) -> None:
    """Delete the group's pending push retries of `topic` (push_retries.py): it no longer pushes from it."""
    try:
        queues = store.get_topic(topic).queues
    except TopicNotFound:  # deleted with its ledgers
        return
    PushRetries(store.pop_ledger, group, topic).forget(queues)
