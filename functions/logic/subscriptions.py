"""A group's push subscription: set, show, clear (the admin side of push delivery).

Setting one checks what can be checked before any delivery (the group and topic exist, the dead-letter
topic's name is valid, the target is written as one and, if a Python target, imports). A change is told to
the `PushNotifier` the caller gives, which sets delivery going for what the group has waiting, from its
committed offsets (each queue's oldest message if it has none).
"""

from __future__ import annotations

from shared.models import GroupPush
from tidemq_store import GroupConfig, MessageStore
from tidemq_store.errors import InvalidArgument, NoPushSubscription
from tidemq_store.model import PushSubscription, check_name

from .notifier import PushNotifier
from .push import dead_letter_topic
from .targets import check_target


def show_push(store: MessageStore, group: str) -> GroupPush:
    """The group's push subscription, or NoPushSubscription if it is pulled from (none set, or cleared)."""
    config = store.get_group(group)
    if config.push is None:
        raise NoPushSubscription(group)
    return _view(config)


def set_push(store: MessageStore, group: str, subscription: PushSubscription, notifier: PushNotifier) -> GroupPush:
    """Make `group` a push group (replacing any subscription it had), and tell `notifier`; nothing changes
    (and nothing is told) if a check fails."""
    config = store.get_group(group)
    store.get_topic(subscription.topic)
    dead_letters = dead_letter_topic(group)
    try:
        check_name("dead-letter topic", dead_letters)
    except InvalidArgument as error:
        raise InvalidArgument(f"group {group!r} cannot push: {error}") from None
    if subscription.topic == dead_letters:
        raise InvalidArgument(f"group {group!r} cannot push from its own dead-letter topic {dead_letters!r}")
    check_target(subscription.target)
    record = PushSubscription(**subscription.model_dump())  # the store's record (the API's model is a subclass)
    updated = store.update_group(config.model_copy(update={"push": record}))
    notifier.subscription_changed(group, subscription.topic)
    return _view(updated)


def clear_push(store: MessageStore, group: str, notifier: PushNotifier) -> None:
    """Stop pushing to `group` (it keeps its offsets, for pulling or a later subscription), and tell `notifier`
    if it was pushed to."""
    config = store.get_group(group)
    if config.push is not None:
        store.update_group(config.model_copy(update={"push": None}))
        notifier.subscription_changed(group, None)


def _view(config: GroupConfig) -> GroupPush:
    return GroupPush(group=config.name, push=config.push, dead_letter_topic=dead_letter_topic(config.name))
