"""A message's trace as a timeline: what the broker recorded of it (stored, delivered, acked, nacked, retried,
dead-lettered, resent, ...), oldest first, from the same logic as `GET /v1/messages/{id}/trace`
(functions/logic/trace.py), with the note that says why a trace is empty or short. Needs Get on the message's
topic, as the API does."""

from __future__ import annotations

from functions.api.auth import require
from functions.logic import trace
from tidemq_protocol import acl
from tidemq_protocol.acl import Action

from ..visit import Visit, page
from ..web import Answer

GROUP = "messaging.consumer.group.name"


@page("GET", "/trace")
def timeline(visit: Visit) -> Answer:
    msg_id = visit.request.arg("id")
    found = trace.message_trace(visit.store, msg_id)
    require((acl.topic(found.topic), Action.GET))
    return visit.page("trace.html", trace=found, group_attribute=GROUP)
