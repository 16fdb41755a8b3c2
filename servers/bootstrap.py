"""What a server does before it serves: refuse to serve unauthenticated beyond loopback, and make the first super
user of an empty store, its credentials written where the CLI and SDK look."""

from __future__ import annotations

import ipaddress
import socket

from functions.api.auth import secret_box
from functions.logic import users
from shared.settings import AuthMode, Settings, get_settings
from tidemq.credentials import Credentials, write_profile
from tidemq_store import MessageStore


def first_super_user(store: MessageStore) -> None:
    """With authentication on and no user in the store yet, make the first super user and write its credentials,
    readable by the owner only, to `<home>/credentials`, where the CLI and SDK look by default."""
    settings = get_settings()
    if settings.auth is AuthMode.OFF:
        return
    created = users.bootstrap_super_user(store, secret_box(), users.FIRST_SUPER_USER)
    path = settings.home / "credentials"
    if created is None:
        if not path.exists():
            print(f"the store has users already; no credentials written to {path}", flush=True)
        return
    url = f"http://{settings.host}:{settings.port}"
    comment = f"TideMQ credentials of super user {created.name!r}, made by the local gateway on its first start."
    write_profile(path, Credentials(created.name, created.secret_key, url), comment=comment)
    print(f"super user {created.name!r} made; its credentials are in {path} (readable by you only)", flush=True)


def check_exposure(settings: Settings) -> None:
    """Refuse to serve without authentication on anything but a loopback address."""
    if settings.auth is AuthMode.ON:
        return
    addresses = {info[4][0] for info in socket.getaddrinfo(settings.host, settings.port, proto=socket.IPPROTO_TCP)}
    exposed = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if exposed:
        raise SystemExit(
            f"TIDEMQ_AUTH=off lets anyone do anything: it is refused on {settings.host} ({', '.join(exposed)}); "
            "listen on 127.0.0.1, or keep authentication on"
        )
