"""Topics: the list (by name prefix, paged), create, describe (queues' offsets, hot and cold ranges, upload lag,
storage class), change retention, queues and attributes, delete (after typing the topic's name)."""

from __future__ import annotations

from functions.api.auth import require, require_any, visible
from functions.logic import tiers, topics
from tidemq_protocol import acl
from tidemq_protocol.acl import Action
from tidemq_protocol.api.topics import TopicChange, TopicSpec
from tidemq_protocol.errors import InvalidArgument

from ..visit import Visit, page
from ..web import Answer, redirect
from .listing import visible_page

STORAGE_CLASS = "tier.storage_class"


@page("GET", "/topics")
def topic_list(visit: Visit) -> Answer:
    request = visit.request
    listing = visible_page(
        lambda after, limit: _page(topics.list_topics(visit.store, after, limit)),
        lambda topic: topic.name,
        lambda name: visible(acl.topic(name)),
        request.arg("after"),
        request.arg("prefix"),
    )
    return visit.page("topics.html", listing=listing, prefix=request.arg("prefix"), after=request.arg("after"))


def _page(found):
    return found.topics, found.next_after


@page("POST", "/topics")
def create(visit: Visit) -> Answer:
    request = visit.request
    spec = TopicSpec(
        name=request.field("name"),
        queues=visit.number("queues", 8, 1, 1024),
        retention_ms=_retention(visit),
        message_type=request.field("message_type", "NORMAL"),
        attributes=_attributes(request.field("attributes")),
    )
    require((acl.topic(spec.name), Action.CREATE))
    topics.create_topic(visit.store, spec)
    return redirect(request.url("/topic", name=spec.name))


@page("GET", "/topic")
def describe(visit: Visit) -> Answer:
    name = visit.request.arg("name")
    require_any(acl.topic(name), Action.GET)
    description = topics.describe_topic(visit.store, name, visit.settings)
    tier = tiers.tier_status(visit.store, name)
    return visit.page(
        "topic.html",
        topic=description,
        tier=tier,
        storage_class=description.attributes.get(STORAGE_CLASS, "STANDARD" if tier.tier else "hot tier only"),
        attributes="\n".join(f"{name}={value}" for name, value in description.attributes.items()),
    )


@page("POST", "/topic/change")
def change(visit: Visit) -> Answer:
    request = visit.request
    name = request.field("name")
    fields = {"retention_ms": _retention(visit)}
    if request.field("queues"):
        fields["queues"] = visit.number("queues", None, 1, 1024)
    if "attributes" in request.form:
        fields["attributes"] = _attributes(request.field("attributes"))
    change = TopicChange(**fields)
    require((acl.topic(name), Action.UPDATE))
    topics.change_topic(visit.store, name, change)
    return redirect(request.url("/topic", name=name))


@page("POST", "/topic/delete")
def delete(visit: Visit) -> Answer:
    request = visit.request
    name = request.field("name")
    require((acl.topic(name), Action.DELETE))
    if request.field("confirm") != name:
        raise InvalidArgument(f"type the topic's name ({name!r}) to confirm deleting it")
    topics.delete_topic(visit.store, name)
    return redirect(request.url("/topics"))


def _retention(visit: Visit) -> int | None:
    """Retention from the form: hours (blank: keep forever)."""
    hours = visit.number("retention_hours", None, 1, 24 * 365 * 100)
    return None if hours is None else hours * 3_600_000


def _attributes(text: str) -> dict[str, str]:
    """Attributes as `name=value` lines."""
    attributes = {}
    for line in text.splitlines():
        if line.strip():
            name, equals, value = line.partition("=")
            if not equals or not name.strip():
                raise InvalidArgument(f"an attribute is a `name=value` line, not {line[:60]!r}")
            attributes[name.strip()] = value.strip()
    return attributes
