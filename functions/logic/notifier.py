"""What produce and subscription logic tell push delivery, through a `PushNotifier` they are given.

The logic says what happened: messages were stored in a topic, a group's push subscription changed. How push
delivery is then set going is the caller's choice, wired outside the logic (`functions.push.trigger`): the
local push worker, an asynchronous invoke of the push function, or nothing at all.
"""

from __future__ import annotations

from typing import Protocol


class PushNotifier(Protocol):
    """Told of what may give push delivery work, after it happened (the messages are stored, the change made)."""

    def messages_stored(self, topic: str) -> None:
        """`topic` has new messages."""

    def subscription_changed(self, group: str, topic: str | None) -> None:
        """`group` now pushes from `topic` (None: no longer pushes)."""
