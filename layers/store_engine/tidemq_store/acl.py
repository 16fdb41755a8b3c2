"""Users as the store keeps them, and the decision their policies give (Apache RocketMQ's ACL 2.0, RIP-68).

The store keeps each user's secret sealed (encrypted by the API layer with a key the store never sees): the
store can neither sign a request nor give a secret back. `decide` is the whole evaluation, a pure function of
the user's record, so every compute path (the gateway, a Lambda authorizer) answers alike. What a policy entry
says is `tidemq_protocol.acl`.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

from pydantic import BaseModel, ConfigDict, Field

from tidemq_protocol.acl import MAX_POLICY_ENTRIES, AclEntry, Action, Decision, Resource, UserName, UserType


class UserRecord(BaseModel):
    """A user as the store keeps it: `sealed_secret` is the secret encrypted by the API layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: UserName
    user_type: UserType = UserType.NORMAL
    sealed_secret: str = Field(min_length=1, max_length=512)
    policies: list[AclEntry] = Field(default_factory=list, max_length=MAX_POLICY_ENTRIES)
    created_at: int = 0


def decide(user: UserRecord, resource: Resource, action: Action, source_ip: str | None) -> Decision:
    """ACL 2.0's answer for one request: a super user may; otherwise a matching Deny denies, a matching Allow
    allows, and nothing matching denies."""
    if user.user_type is UserType.SUPER:
        return Decision.ALLOW
    source = _address(source_ip)
    matching = [entry.decision for entry in user.policies if entry.covers(resource, action, source)]
    if Decision.DENY in matching or not matching:
        return Decision.DENY
    return Decision.ALLOW


def _address(source_ip: str | None) -> IPv4Address | IPv6Address | None:
    try:
        return ip_address(source_ip) if source_ip else None
    except ValueError:
        return None
