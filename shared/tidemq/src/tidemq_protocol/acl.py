"""Users and what they may do: Apache RocketMQ's ACL 2.0 (RIP-68, 5.3), as client and server write it.

A user is a *super* user (may do anything, and alone manages users and policies) or a *normal* one, who may
do what its policy entries allow:

    resource     `Topic:orders` (literal), `Topic:orders-*` (prefix), `Topic:*` (any topic), `Group:...`,
                 `Namespace:...` (a KV namespace), `Cluster:*` (the cluster itself), or `*` (anything)
    actions      Pub, Sub, Create, Update, Delete, Get, List, Export (the console's exports), or All
    decision     Allow or Deny; a Deny that matches wins over any Allow, and nothing matching is a Deny
    source_ips   CIDRs the request must come from (empty: anywhere)

The store keeps each user with its entries (`tidemq_store.acl.UserRecord`) and decides with them
(`tidemq_store.acl.decide`); this module is the vocabulary: user types, actions, resources and policy entries.
"""

from __future__ import annotations

import re
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network
from typing import Annotated, NamedTuple

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from .names import NAME_RULE

USER_NAME_RULE = re.compile(r"[A-Za-z0-9_-]{3,64}")
MAX_POLICY_ENTRIES = 100


class UserType(StrEnum):
    SUPER = "Super"
    NORMAL = "Normal"


class Action(StrEnum):
    PUB = "Pub"  # produce
    SUB = "Sub"  # consume, commit offsets
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"  # describe, look messages up, read lag
    LIST = "List"  # see it in a listing
    EXPORT = "Export"  # the console's export of a topic's messages or dead letters (with Get, or Sub on dead letters)
    ALL = "All"


class Decision(StrEnum):
    ALLOW = "Allow"
    DENY = "Deny"


class ResourceType(StrEnum):
    CLUSTER = "Cluster"
    TOPIC = "Topic"
    GROUP = "Group"
    NAMESPACE = "Namespace"  # a KV namespace (kv/): Sub reads and watches it, Pub writes it


class Resource(NamedTuple):
    """What a request acts on: a topic, a group, or the cluster (`name` "*" for the cluster as a whole)."""

    type: ResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


def topic(name: str) -> Resource:
    return Resource(ResourceType.TOPIC, name)


def group(name: str) -> Resource:
    return Resource(ResourceType.GROUP, name)


def namespace(name: str) -> Resource:
    return Resource(ResourceType.NAMESPACE, name)


CLUSTER = Resource(ResourceType.CLUSTER, "*")


def _check_pattern(pattern: str) -> str:
    if pattern == "*":
        return pattern
    kind, _, name = pattern.partition(":")
    if kind not in ResourceType.__members__.values():
        raise ValueError(f"resource {pattern!r} must be '*' or <Cluster|Topic|Group|Namespace>:<name>, <prefix>* or *")
    if name != "*" and not NAME_RULE.fullmatch(name.removesuffix("*")):
        raise ValueError(f"resource {pattern!r}: {name!r} is not a name, a name prefix followed by '*', or '*'")
    return pattern


def _check_user_name(name: str) -> str:
    if not USER_NAME_RULE.fullmatch(name):
        raise ValueError("a user name is 3 to 64 letters, digits, '_' or '-'")
    return name


def _network(value: object) -> Network:
    """A CIDR written as a string, host bits allowed (`10.1.2.3/8` is 10.0.0.0/8), or an address alone (a /32
    or /128)."""
    if isinstance(value, IPv4Network | IPv6Network):
        return value
    if not isinstance(value, str):
        raise ValueError("a source network is a CIDR string, e.g. 10.0.0.0/8")  # not a number read as an address
    return ip_network(value, strict=False)


RESOURCE_PATTERN = f"^(?:\\*|(?:Cluster|Topic|Group|Namespace):(?:\\*|{NAME_RULE.pattern}\\*?))$"
ResourcePattern = Annotated[
    str,
    AfterValidator(_check_pattern),
    WithJsonSchema({"type": "string", "pattern": RESOURCE_PATTERN}),
]
UserName = Annotated[
    str,
    AfterValidator(_check_user_name),
    WithJsonSchema({"type": "string", "pattern": f"^{USER_NAME_RULE.pattern}$"}),
]
Network = IPv4Network | IPv6Network
SourceNetwork = Annotated[Network, BeforeValidator(_network)]


class AclEntry(BaseModel):
    """One policy entry (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource: ResourcePattern = Field(
        description="`Topic:orders`, `Topic:orders-*`, `Topic:*`, `Group:...`, `Namespace:...`, `*`."
    )
    actions: list[Action] = Field(min_length=1, max_length=len(Action))
    decision: Decision = Decision.ALLOW
    source_ips: list[SourceNetwork] = Field(default_factory=list, max_length=32, description="CIDRs; empty: anywhere.")

    def covers(self, resource: Resource, action: Action, source: IPv4Address | IPv6Address | None) -> bool:
        """Whether this entry speaks about `action` on `resource` from `source`."""
        if action not in self.actions and Action.ALL not in self.actions:
            return False
        if self.source_ips and (source is None or not any(source in network for network in self.source_ips)):
            return False
        if self.resource == "*":
            return True
        kind, _, name = self.resource.partition(":")
        if kind != resource.type:
            return False
        if name == "*":
            return True
        if name.endswith("*"):
            return resource.name.startswith(name[:-1])
        return resource.name == name
