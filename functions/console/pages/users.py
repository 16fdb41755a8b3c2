"""Users and their ACL policies (super users only, as in the HTTP API): list, create (the secret shown once),
rotate a secret (shown once), grant a policy entry, revoke a resource's entries, delete."""

from __future__ import annotations

from functions.api.auth import authenticator, require_super, secret_box
from functions.logic import users
from tidemq_protocol.acl import AclEntry
from tidemq_protocol.api.users import UserSpec
from tidemq_protocol.errors import AccessDenied, InvalidArgument

from ..visit import Visit, page
from ..web import Answer, redirect


@page("GET", "/users")
def user_list(visit: Visit) -> Answer:
    require_super()
    found = visit.store.list_users(visit.request.arg("after") or None, 100)
    return visit.page("users.html", users=[users.view(u) for u in found], next_after=found.next_after)


@page("POST", "/users")
def create(visit: Visit) -> Answer:
    request = visit.request
    spec = UserSpec(name=request.field("name"), user_type=request.field("user_type", "Normal"))
    require_super()
    created = users.create_user(visit.store, secret_box(), spec)
    return visit.page("secret.html", created=created)


@page("GET", "/user")
def describe(visit: Visit) -> Answer:
    require_super()
    return visit.page("user.html", shown=users.view(visit.store.get_user(visit.request.arg("name"))))


@page("POST", "/user/rotate")
def rotate(visit: Visit) -> Answer:
    require_super()
    name = visit.request.field("name")
    rotated = users.rotate_secret(visit.store, secret_box(), name)
    authenticator().forget(name)
    return visit.page("secret.html", created=rotated)


@page("POST", "/user/grant")
def grant(visit: Visit) -> Answer:
    request = visit.request
    name = request.field("name")
    entry = AclEntry(
        resource=request.field("resource"),
        actions=request.fields("actions"),
        decision=request.field("decision", "Allow"),
        source_ips=[cidr.strip() for cidr in request.field("source_ips").split(",") if cidr.strip()],
    )
    require_super()
    users.grant(visit.store, name, entry)
    authenticator().forget(name)
    return redirect(request.url("/user", name=name))


@page("POST", "/user/revoke")
def revoke(visit: Visit) -> Answer:
    name = visit.request.field("name")
    require_super()
    users.revoke(visit.store, name, visit.request.field("resource"))
    authenticator().forget(name)
    return redirect(visit.request.url("/user", name=name))


@page("POST", "/user/delete")
def delete(visit: Visit) -> Answer:
    request = visit.request
    name = request.field("name")
    require_super()
    if name == visit.user.name:
        raise AccessDenied("a super user cannot delete itself: another super user can")
    if request.field("confirm") != name:
        raise InvalidArgument(f"type the user's name ({name!r}) to confirm deleting it")
    visit.store.delete_user(name)
    authenticator().forget(name)
    return redirect(request.url("/users"))
