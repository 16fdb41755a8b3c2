"""`tidemq user ...` and `tidemq acl ...`: users, their secrets and their policies (RocketMQ ACL 2.0). Super
users only, but for `tidemq user whoami`."""

from __future__ import annotations

import click
from pydantic import ValidationError

from tidemq_protocol.acl import AclEntry, Action, Decision
from tidemq_protocol.api.users import UserCreated, UserView
from tidemq_protocol.errors import InvalidArgument

from ..admin import Admin
from ..client import HttpClient
from .options import deleting
from .output import stdout, table, timestamp

ACTIONS = ", ".join(Action)


@click.group()
def user() -> None:
    """Users: create, list, rotate a secret, delete."""


@user.command("create")
@click.argument("name")
@click.option("--super", "super_user", is_flag=True, help="A super user: may do anything, and manage users.")
@click.pass_obj
def create(client: HttpClient, name: str, super_user: bool) -> None:
    """Create user NAME and print its secret key: it is shown this once (keep it in a credentials file)."""
    show_secret(Admin(client=client).create_user(name, super_user=super_user), "created")


@user.command("list")
@click.pass_obj
def list_(client: HttpClient) -> None:
    """List the users, with their type and how many policy entries they have."""
    rows = table("user", "type", "policies", "created", numeric=["policies"])
    for view in Admin(client=client).iter_users():
        rows.add_row(view.name, view.user_type, str(len(view.policies)), timestamp(view.created_at))
    stdout.print(rows)


@user.command("rotate")
@click.argument("name")
@click.pass_obj
def rotate(client: HttpClient, name: str) -> None:
    """Give user NAME a new secret key and print it (the old one stops working at once)."""
    show_secret(Admin(client=client).rotate_secret(name), "rotated")


@user.command("delete")
@deleting("name", "user", "Delete user {!r}?")
def delete(client: HttpClient, name: str) -> None:
    """Delete user NAME: its requests are refused from then on."""
    Admin(client=client).delete_user(name)


@user.command("whoami")
@click.pass_obj
def whoami(client: HttpClient) -> None:
    """Show the user this command signs as."""
    caller = Admin(client=client).whoami()
    stdout.print(f"{caller.name} ({caller.user_type})")


def show_secret(created: UserCreated, what: str) -> None:
    stdout.print(f"{what} user {created.name!r} ({created.user_type}); its secret key, shown this once:")
    stdout.print(f"access_key = {created.name}\nsecret_key = {created.secret_key}")


@click.group()
def acl() -> None:
    """Access policies of normal users: grant, revoke, list."""


@acl.command("grant")
@click.argument("name")
@click.option("--resource", required=True, help="Topic:NAME, Topic:PREFIX*, Topic:*, Group:..., Cluster:*, or *.")
@click.option("--actions", required=True, help=f"Comma-separated, of {ACTIONS}.")
@click.option("--deny", is_flag=True, help="A Deny entry (a matching Deny wins over any Allow).")
@click.option("--source-ip", "source_ips", multiple=True, help="A CIDR the request must come from (repeatable).")
@click.pass_obj
def grant(client: HttpClient, name: str, resource: str, actions: str, deny: bool, source_ips: tuple[str, ...]) -> None:
    """Give user NAME a policy entry: ACTIONS on RESOURCE (Allow, or Deny with --deny), from SOURCE_IPs."""
    try:
        wanted = [action.strip() for action in actions.split(",") if action.strip()]
        decision = Decision.DENY if deny else Decision.ALLOW
        entry = AclEntry(resource=resource, actions=wanted, decision=decision, source_ips=list(source_ips))
    except ValidationError as error:
        first = error.errors()[0]
        raise InvalidArgument(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    show_policies(Admin(client=client).grant(name, entry))


@acl.command("revoke")
@click.argument("name")
@click.option("--resource", required=True, help="The resource pattern, as granted.")
@click.pass_obj
def revoke(client: HttpClient, name: str, resource: str) -> None:
    """Remove user NAME's policy entries on RESOURCE."""
    show_policies(Admin(client=client).revoke(name, resource))


@acl.command("list")
@click.argument("name")
@click.pass_obj
def list_policies(client: HttpClient, name: str) -> None:
    """Show user NAME's policy entries."""
    show_policies(Admin(client=client).describe_user(name))


def show_policies(view: UserView) -> None:
    if not view.policies:
        stdout.print(f"user {view.name!r} ({view.user_type}) has no policy entries")
        return
    rows = table("resource", "actions", "decision", "source ips")
    for entry in view.policies:
        sources = ", ".join(map(str, entry.source_ips)) or "any"
        rows.add_row(entry.resource, ", ".join(entry.actions), entry.decision, sources)
    stdout.print(rows)
