"""The message browser: a queue's messages from an offset or a time (bounded scans that say how far they looked),
by key, or by id, with a tag or SQL92 filter; each body as text, JSON or hex; the selection exported as JSON lines
or CSV. Browsing needs Get on the topic (as the HTTP API's lookups do); exporting needs Export on it too."""

from __future__ import annotations

from dataclasses import dataclass

from functions.api.auth import require
from functions.logic import queries
from functions.logic.browse import QueueScan, scan_queue
from tidemq_protocol import acl
from tidemq_protocol.acl import Action
from tidemq_protocol.api.messages import MessageView
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.filter import subscription_filter

from ..bodies import VIEWS, export_answer, shown_body
from ..visit import Visit, page
from ..web import Answer

SHOWN = 50
EXPORTED = 1000


@dataclass(frozen=True)
class Search:
    """What a browser search found: messages, and for a queue scan how far it looked."""

    messages: list[MessageView]
    scan: QueueScan | None


def search(visit: Visit, want: int) -> Search:
    """The search the page's query asks for (by id, by key, else a bounded scan of one queue)."""
    request = visit.request
    msg_id, topic, key = request.arg("id"), request.arg("topic"), request.arg("key")
    if msg_id:
        message = queries.message_by_id(visit.store, msg_id)
        require((acl.topic(message.topic), Action.GET))
        return Search([message], None)
    if not topic:
        return Search([], None)
    require((acl.topic(topic), Action.GET))
    if key:
        return Search(queries.messages_by_key(visit.store, topic, key, want).messages, None)
    queue = visit.number("queue", 0, 0, 1023)
    when = visit.time_ms("time")
    offset = visit.number("offset", 0)
    if when is not None:
        offset = queries.offset_for_time(visit.store, topic, queue, when).offset
    chosen = subscription_filter(request.arg("tag") or None, request.arg("sql") or None)
    scan = scan_queue(visit.store, topic, queue, offset, chosen, want, visit.settings.console_scan_limit)
    return Search(scan.messages, scan)


@page("GET", "/messages")
def browse(visit: Visit) -> Answer:
    view = _view(visit)
    found = search(visit, SHOWN)
    bodies = {m.msg_id: shown_body(m, view) for m in found.messages}
    return visit.page("messages.html", found=found, bodies=bodies, view=view, views=VIEWS, q=visit.request.query)


@page("GET", "/message")
def message(visit: Visit) -> Answer:
    view = _view(visit)
    found = queries.message_by_id(visit.store, visit.request.arg("id"))
    require((acl.topic(found.topic), Action.GET))
    return visit.page(
        "message.html", message=found, body=shown_body(found, view), view=view, views=VIEWS, trace_page=True
    )


@page("GET", "/messages/export")
def export(visit: Visit) -> Answer:
    found = search(visit, EXPORTED)
    for topic in {m.topic for m in found.messages} | ({visit.request.arg("topic")} - {""}):
        require((acl.topic(topic), Action.GET), (acl.topic(topic), Action.EXPORT))
    return export_answer(found.messages, visit.request.arg("format", "jsonl"), "messages")


def _view(visit: Visit) -> str:
    view = visit.request.arg("view", "text")
    if view not in VIEWS:
        raise InvalidArgument(f"a body is shown as {', '.join(VIEWS)}, not {view[:20]!r}")
    return view
