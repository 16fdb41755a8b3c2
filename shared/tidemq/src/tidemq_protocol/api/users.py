"""The HTTP API's bodies for users and access control (RocketMQ ACL 2.0: `tidemq_protocol.acl`)."""

from __future__ import annotations

from pydantic import (
    Field,
)

from tidemq_protocol.acl import MAX_POLICY_ENTRIES, AclEntry, UserName, UserType

from .common import ApiModel


class UserSpec(ApiModel):
    """A user to create: a super user may do anything (and alone manages users); a normal one what its
    policies allow."""

    name: UserName = Field(description="The user's name, which is also its access key.")
    user_type: UserType = UserType.NORMAL
    policies: list[AclEntry] = Field(default_factory=list, max_length=MAX_POLICY_ENTRIES)


class UserView(ApiModel):
    """A user as the API shows it: never its secret."""

    name: str
    user_type: UserType
    policies: list[AclEntry]
    created_at: int


class UserCreated(UserView):
    """A user with its secret key, shown this once (at creation and rotation): keep it, it cannot be read back."""

    secret_key: str


class UserList(ApiModel):
    users: list[UserView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")


class AclRevoke(ApiModel):
    resource: str = Field(description="The resource pattern whose entries go, as it was granted.")


class Caller(ApiModel):
    """Who the request was signed by."""

    name: str
    user_type: UserType
