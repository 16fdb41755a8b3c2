"""A group's dead letters (`%DLQ%<group>`): browse them (with when each was resent, if it was), resend the chosen ones
or a range of offsets to the topics they came from, export them. The same needs as the HTTP API's: Sub on the
group and its dead-letter topic to look, Pub on each origin topic to resend; Export on the group to export."""

from __future__ import annotations

from functions.api.auth import require
from functions.logic import dead_letters
from functions.logic.push import dead_letter_topic
from functions.push.trigger import push_notifier
from tidemq_protocol import acl
from tidemq_protocol.acl import Action
from tidemq_protocol.api.dead_letters import ResendRequest
from tidemq_protocol.errors import InvalidArgument

from ..bodies import VIEWS, export_answer, shown_body
from ..visit import Visit, page
from ..web import Answer

SHOWN = 50


def _may_look(group: str) -> None:
    require((acl.group(group), Action.SUB), (acl.topic(dead_letter_topic(group)), Action.SUB))


@page("GET", "/dead-letters")
def browse(visit: Visit) -> Answer:
    group = visit.request.arg("group")
    view = visit.request.arg("view", "text")
    if not group:
        return visit.page("dead_letters.html", letters=None, group="", view=view, views=VIEWS, bodies={})
    _may_look(group)
    letters = dead_letters.list_dead_letters(visit.store, group, visit.number("offset", 0), SHOWN)
    bodies = {m.msg_id: shown_body(m, view if view in VIEWS else "text") for m in letters.messages}
    return visit.page("dead_letters.html", letters=letters, group=group, view=view, views=VIEWS, bodies=bodies)


@page("POST", "/dead-letters/resend")
def resend(visit: Visit) -> Answer:
    request = visit.request
    group = request.field("group")
    ids = request.fields("msg_id")
    if ids:
        chosen = ResendRequest(message_ids=ids)
    elif request.field("from_offset"):
        chosen = ResendRequest(from_offset=visit.number("from_offset"), to_offset=visit.number("to_offset"))
    else:
        raise InvalidArgument("choose dead letters to resend (tick them), or give a range of offsets")
    require((acl.group(group), Action.SUB))
    letters, next_offset = dead_letters.chosen(visit.store, group, chosen)
    outcome = dead_letters.resend(
        visit.store, group, letters, next_offset, push_notifier(), lambda t: require((acl.topic(t), Action.PUB))
    )
    return visit.page("resent.html", group=group, outcome=outcome)


@page("GET", "/dead-letters/export")
def export(visit: Visit) -> Answer:
    group = visit.request.arg("group")
    _may_look(group)
    require((acl.group(group), Action.EXPORT))
    letters = dead_letters.list_dead_letters(visit.store, group, visit.number("offset", 0), 1000)
    return export_answer(letters.messages, visit.request.arg("format", "jsonl"), f"dead-letters-{group}")
