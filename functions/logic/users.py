"""Users and their policies (RocketMQ ACL 2.0: `tidemq_store.acl`): create, rotate a secret, grant, revoke.

A user's secret is made here (256 random bits), shown once, and stored sealed: AES-GCM under the process's
auth key, the user's name bound in as associated data, so neither the store nor a copy of it holds a usable
credential, and a sealed secret moved to another user does not open. Only the API layer (which verifies
signatures) opens a sealed secret.
"""

from __future__ import annotations

import base64
import os
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tidemq_protocol.acl import MAX_POLICY_ENTRIES, AclEntry, UserType
from tidemq_protocol.api.users import UserCreated, UserSpec, UserView
from tidemq_protocol.errors import PolicyConflict, UserExists
from tidemq_store import MessageStore
from tidemq_store.acl import UserRecord

FIRST_SUPER_USER = "admin"
"""The super user a store gets when it has no user yet (the local gateway's first start, or the bootstrap function)."""
SEALED_VERSION = "v1:"
KEY_BYTES = 32


class SecretBox:
    """Seals and opens users' secrets with one 32-byte key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"an auth key is {KEY_BYTES} bytes, not {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, user: str, secret: str) -> str:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, secret.encode(), user.encode())
        return SEALED_VERSION + base64.b64encode(nonce + sealed).decode()

    def open(self, user: str, sealed: str) -> str:
        """The secret; ValueError if `sealed` was not sealed for `user` with this key."""
        if not sealed.startswith(SEALED_VERSION):
            raise ValueError("not a sealed secret")
        raw = base64.b64decode(sealed.removeprefix(SEALED_VERSION))
        try:
            return self._aead.decrypt(raw[:12], raw[12:], user.encode()).decode()
        except InvalidTag:
            raise ValueError("the secret was sealed with another key, or for another user") from None


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def view(user: UserRecord) -> UserView:
    return UserView(name=user.name, user_type=user.user_type, policies=user.policies, created_at=user.created_at)


def create_user(store: MessageStore, box: SecretBox, spec: UserSpec) -> UserCreated:
    """A new user with a new secret, returned this once."""
    secret = new_secret()
    sealed = box.seal(spec.name, secret)
    record = UserRecord(name=spec.name, user_type=spec.user_type, sealed_secret=sealed, policies=spec.policies)
    created = store.create_user(record)
    return UserCreated(**view(created).model_dump(), secret_key=secret)


def rotate_secret(store: MessageStore, box: SecretBox, name: str) -> UserCreated:
    """Give the user a new secret (the old one stops working), returned this once."""
    current = store.get_user(name)
    secret = new_secret()
    updated = store.update_user(current.model_copy(update={"sealed_secret": box.seal(name, secret)}))
    return UserCreated(**view(updated).model_dump(), secret_key=secret)


def grant(store: MessageStore, name: str, entry: AclEntry) -> UserView:
    """Add a policy entry to the user (an identical entry is not added twice)."""
    current = store.get_user(name)
    if current.user_type is UserType.SUPER:
        raise PolicyConflict(f"user {name!r} is a super user: policies do not apply to it")
    policies = current.policies if entry in current.policies else [*current.policies, entry]
    if len(policies) > MAX_POLICY_ENTRIES:
        raise PolicyConflict(f"user {name!r} has {MAX_POLICY_ENTRIES} policy entries, the most it may have")
    return view(store.update_user(current.model_copy(update={"policies": policies})))


def revoke(store: MessageStore, name: str, resource: str) -> UserView:
    """Remove the user's policy entries on `resource` (the pattern as granted)."""
    current = store.get_user(name)
    kept = [entry for entry in current.policies if entry.resource != resource]
    if len(kept) == len(current.policies):
        raise PolicyConflict(f"user {name!r} has no policy entry on {resource!r}")
    return view(store.update_user(current.model_copy(update={"policies": kept})))


def bootstrap_super_user(store: MessageStore, box: SecretBox, name: str) -> UserCreated | None:
    """The first super user of a store that has no user yet (None: it has users already)."""
    if store.list_users(limit=1):
        return None
    try:
        return create_user(store, box, UserSpec(name=name, user_type=UserType.SUPER))
    except UserExists:  # another process made it meanwhile
        return None
