"""The process's BrokerContainer, once `tidemq container` has started it (server.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .container import BrokerContainer

_container: BrokerContainer | None = None


def container() -> BrokerContainer:
    if _container is None:
        raise RuntimeError("no BrokerContainer runs in this process")
    return _container


def set_container(running: BrokerContainer | None) -> None:
    global _container
    _container = running
