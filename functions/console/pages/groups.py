"""Consumer groups: the list (by name prefix, paged), create, describe (lag per queue with the committed offset and
when it moved), reset offsets to the earliest, the latest or a time, the pop settings (retry policy), the push
subscription (set, shown, cleared), delete."""

from __future__ import annotations

from functions.api.auth import require, require_any, visible
from functions.logic import groups, offset_moves, subscriptions
from functions.logic.push import dead_letter_topic
from functions.logic.targets import TargetRules
from functions.push.trigger import push_notifier
from tidemq_protocol import acl
from tidemq_protocol.acl import Action
from tidemq_protocol.api.groups import GroupChange, GroupSpec, OffsetReset, PushSubscription
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.retry import RetryPolicy

from ..visit import Visit, page
from ..web import Answer, redirect
from .listing import visible_page


@page("GET", "/groups")
def group_list(visit: Visit) -> Answer:
    request = visit.request
    listing = visible_page(
        lambda after, limit: _page(groups.list_groups(visit.store, after, limit)),
        lambda group: group.name,
        lambda name: visible(acl.group(name)),
        request.arg("after"),
        request.arg("prefix"),
    )
    return visit.page("groups.html", listing=listing, prefix=request.arg("prefix"), after=request.arg("after"))


def _page(found):
    return found.groups, found.next_after


@page("POST", "/groups")
def create(visit: Visit) -> Answer:
    request = visit.request
    spec = GroupSpec(name=request.field("name"), fifo=request.field("fifo") == "on", retry=_retry(visit))
    require((acl.group(spec.name), Action.CREATE))
    groups.create_group(visit.store, spec)
    return redirect(request.url("/group", name=spec.name))


@page("GET", "/group")
def describe(visit: Visit) -> Answer:
    name, topic = visit.request.arg("name"), visit.request.arg("topic") or None
    require_any(acl.group(name), Action.GET, Action.SUB)
    description = groups.describe_group(visit.store, name, topic)
    shown = [lag for lag in description.topics if visible(acl.topic(lag.topic))]
    moves = offset_moves.moves_of(visit.store, name)
    return visit.page(
        "group.html",
        group=description,
        lags=shown,
        moves=moves,
        dead_letter_topic=dead_letter_topic(name),
        topic=topic or "",
    )


@page("POST", "/group/reset")
def reset(visit: Visit) -> Answer:
    request = visit.request
    name, to = request.field("name"), request.field("to")
    timestamp = visit.time_ms("time") if to == "timestamp" else None
    change = OffsetReset(topic=request.field("topic"), to=to, timestamp=timestamp)
    require((acl.group(name), Action.UPDATE), (acl.topic(change.topic), Action.SUB))
    groups.reset_offsets(visit.store, name, change)
    return redirect(request.url("/group", name=name))


@page("POST", "/group/change")
def change(visit: Visit) -> Answer:
    request = visit.request
    name = request.field("name")
    change = GroupChange(retry=_retry(visit))
    require((acl.group(name), Action.UPDATE))
    groups.change_group(visit.store, name, change)
    return redirect(request.url("/group", name=name))


@page("POST", "/group/push")
def set_push(visit: Visit) -> Answer:
    """Push the topic's new messages to a target (as `PUT /v1/groups/{group}/push`: a webhook must answer its signed
    ping); the webhook's signing secret is shown this once."""
    request = visit.request
    name = request.field("name")
    subscription = PushSubscription(
        topic=request.field("topic"),
        target=request.field("target"),
        tag=request.field("tag") or "*",
        sql=request.field("sql") or None,
        batch_size=visit.number("batch_size", 1, 1, 1000),
    )
    require((acl.group(name), Action.UPDATE), (acl.topic(subscription.topic), Action.SUB))
    pushed = subscriptions.set_push(visit.store, name, subscription, push_notifier(), TargetRules.of(visit.settings))
    return visit.page("pushed.html", pushed=pushed)


@page("POST", "/group/clear-push")
def clear_push(visit: Visit) -> Answer:
    name = visit.request.field("name")
    require((acl.group(name), Action.UPDATE))
    subscriptions.clear_push(visit.store, name, push_notifier())
    return redirect(visit.request.url("/group", name=name))


@page("POST", "/group/delete")
def delete(visit: Visit) -> Answer:
    request = visit.request
    name = request.field("name")
    require((acl.group(name), Action.DELETE))
    if request.field("confirm") != name:
        raise InvalidArgument(f"type the group's name ({name!r}) to confirm deleting it")
    groups.delete_group(visit.store, name)
    return redirect(request.url("/groups"))


def _retry(visit: Visit) -> RetryPolicy | None:
    attempts = visit.number("max_delivery_attempts", None, 1, 10_000)
    return None if attempts is None else RetryPolicy(max_delivery_attempts=attempts)
