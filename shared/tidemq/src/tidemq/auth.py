"""The SDK's credentials: where they are found, and the signature every request carries (`tidemq_protocol.signing`).

Credentials are, in this order, the first found:

1. those given to the client (`credentials=`);
2. `TIDEMQ_ACCESS_KEY` and `TIDEMQ_SECRET_KEY`;
3. a named profile (`profile=`, the CLI's `--profile`, or `TIDEMQ_PROFILE`) in the credentials file
   (`TIDEMQ_CREDENTIALS_FILE`, else `~/.tidemq/credentials`): an error if it is not there;
4. the `default` profile of `TIDEMQ_CREDENTIALS_FILE`, of `<TIDEMQ_HOME>/credentials` (TIDEMQ_HOME defaults to
   `.tidemq`: what `make run` writes on its first start), then of `~/.tidemq/credentials`.

Without any, requests go unsigned, and the server answers 401 saying how to sign.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote

from tidemq.credentials import DEFAULT_PROFILE, Credentials, read_profile
from tidemq_protocol import signing
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import InvalidArgument

USER_FILE = Path("~/.tidemq/credentials")


def find_credentials(profile: str | None = None) -> Credentials | None:
    """The credentials this process uses (see the module docstring)."""
    access_key, secret_key = os.environ.get("TIDEMQ_ACCESS_KEY"), os.environ.get("TIDEMQ_SECRET_KEY")
    if access_key and secret_key:
        return Credentials(access_key, secret_key)
    named_file = os.environ.get("TIDEMQ_CREDENTIALS_FILE")
    profile = profile or os.environ.get("TIDEMQ_PROFILE")
    if profile:
        path = Path(named_file).expanduser() if named_file else USER_FILE.expanduser()
        found = read_profile(path, profile)
        if found is None:
            raise InvalidArgument(f"no profile [{profile}] in {path}")
        return found
    home = Path(os.environ.get("TIDEMQ_HOME") or ".tidemq")
    for path in (Path(named_file) if named_file else None, home / "credentials", USER_FILE.expanduser()):
        if path is not None and (found := read_profile(path.expanduser(), DEFAULT_PROFILE)) is not None:
            return found
    return None


def signature_headers(credentials: Credentials, method: str, target: str, body: bytes) -> dict[str, str]:
    """The headers that sign one request (`target`: its path as sent, percent-encoded, with its query) as the
    credentials' user: a fresh time and nonce each call, so a retry is no replay."""
    raw_path, _, raw_query = target.partition("?")
    signed = signing.SignedRequest(
        method, unquote(raw_path), raw_query, signing.body_sha256(body), now_ms(), signing.new_nonce()
    )
    return signing.headers(credentials.access_key, credentials.secret_key, signed)
