"""The credentials file: the one module that reads and writes it (the SDK and CLI read it; the local gateway
writes the first super user's into `<TIDEMQ_HOME>/credentials`).

An INI file of named profiles, like `~/.aws/credentials`:

    [default]
    access_key = admin
    secret_key = 2vQ...
    url = http://127.0.0.1:8080          (optional: the server these credentials are for)

It holds secrets, so it is written readable by its owner only (0600), atomically.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import NamedTuple

DEFAULT_PROFILE = "default"


class Credentials(NamedTuple):
    """A user's access key (its name) and secret key."""

    access_key: str
    secret_key: str
    url: str | None = None

    def __repr__(self) -> str:  # never print a secret by accident
        return f"Credentials(access_key={self.access_key!r}, secret_key='***', url={self.url!r})"


def read_profile(path: Path, profile: str = DEFAULT_PROFILE) -> Credentials | None:
    """The profile's credentials in the file at `path`, None if there is no such file or profile."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path) as file:
            parser.read_file(file)
    except FileNotFoundError:
        return None
    if not parser.has_section(profile):
        return None
    section = parser[profile]
    if not section.get("access_key") or not section.get("secret_key"):
        raise ValueError(f"{path}: profile [{profile}] needs access_key and secret_key")
    return Credentials(section["access_key"], section["secret_key"], section.get("url"))


def write_profile(path: Path, credentials: Credentials, profile: str = DEFAULT_PROFILE, comment: str = "") -> None:
    """Write (or replace) one profile in the file at `path`, keeping its other profiles; 0600, atomically."""
    parser = configparser.ConfigParser(interpolation=None)
    if path.exists():
        parser.read(path)
    parser[profile] = {"access_key": credentials.access_key, "secret_key": credentials.secret_key}
    if credentials.url:
        parser[profile]["url"] = credentials.url
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        if comment:
            file.write("".join(f"# {line}\n" for line in comment.splitlines()))
        parser.write(file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
