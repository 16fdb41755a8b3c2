"""Container: a BrokerContainer's admin API (RIP-31), `/container/v1`, as `tidemq_protocol.api` values.

    from tidemq import Admin, Container, Producer

    container = Container("http://127.0.0.1:10811")
    container.add_broker({"brokerName": "b", "quotaPercentForDiskPartition": "0.5"})  # or a broker-b.conf's text
    Admin(container.broker_url("b")).create_topic("orders")
    with Producer("orders", container.broker_url("b")) as producer:
        producer.send(b"hello")
    container.promote("b-slave")  # a slave becomes SYNC_MASTER (brokerId 0)

Each call needs an action on `Cluster:*` (super users have them all): List or Get to look, Create to add a broker,
Delete to remove one, Update to change a config; a caller without it gets `AccessDenied`. The container's users
are at its root URL (`Admin(container.url).create_user(...)`); a broker's topics, groups, messages and KV at
`container.broker_url(name)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from tidemq_protocol.api.container import BrokerList, BrokerSettings, BrokerView
from tidemq_protocol.errors import InvalidArgument

from .api_client import ApiClient, model_of
from .client import segment

BROKERS = "/container/v1/brokers"
MasterRole = Literal["SYNC_MASTER", "ASYNC_MASTER"]
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


def to_properties(settings: Mapping[str, str]) -> str:
    """Settings as the `key=value` lines of a broker config file; a key or value that would not read back as
    the same one line (a line break, a key with `=`, `:` or blanks, an empty key) is refused."""
    lines = []
    for key, value in settings.items():
        key, value = str(key), str(value)
        if not key or any(char in key for char in "=:#!") or any(char.isspace() for char in key):
            raise InvalidArgument(f"{key!r} is not a setting's name (camelCase, as in a broker config file)")
        if "\n" in value or "\r" in value:
            raise InvalidArgument(f"the value of {key!r} holds a line break")
        lines.append(f"{key}={value}\n")
    return "".join(lines)


class Container(ApiClient):
    """Add, list, inspect, reconfigure, promote and remove the brokers of a BrokerContainer.

    `url` is the container's base URL (`http://<host>:<listenPort>`); errors are the engine's classes
    (`BrokerNotFound`, `BrokerExists`, `InvalidArgument`, `AccessDenied`; see `tidemq.errors`).
    """

    @property
    def url(self) -> str:
        """The container's base URL (its users are at `/v1/users` under it)."""
        return self._client.url

    def broker_url(self, name: str) -> str:
        """The base URL of broker `name`, for an Admin, Producer, Consumer or KV of that broker."""
        return f"{self.url}/brokers/{segment(name)}"

    # ---- the brokers -----------------------------------------------------------------------------

    def list_brokers(self) -> list[BrokerView]:
        """Every broker of the container (by name), with its role, disk usage and quota, and replication."""
        return self._get(BrokerList, BROKERS).brokers

    def get_broker(self, name: str) -> BrokerView:
        """Broker `name`; raises BrokerNotFound."""
        return self._get(BrokerView, f"{BROKERS}/{segment(name)}")

    def add_broker(self, properties: str | Mapping[str, str]) -> BrokerView:
        """Add a broker from its config: the text of a broker .conf file (`brokerName=b` lines), or its settings
        as a mapping (`{"brokerName": "b"}`). Its store opens, and recovers, before this returns. Its
        `storePathRootDir` must be under the container's directory (default: `<root>/brokers/<brokerName>`).
        Raises BrokerExists, InvalidArgument (an unknown key, a bad value: the server says which)."""
        text = properties if isinstance(properties, str) else to_properties(properties)
        return model_of(BrokerView, self._client.request("POST", BROKERS, json={"properties": text}))

    def remove_broker(self, name: str) -> None:
        """Remove broker `name`: it stops taking requests, finishes those in flight, flushes and closes. Its files
        stay: added again with the same config, it has its data."""
        self._client.request("DELETE", f"{BROKERS}/{segment(name)}")

    def broker_config(self, name: str) -> dict[str, str]:
        """Broker `name`'s settings by their config-file keys, as its file (and later updates) gave them; secret
        keys are shown as `********`."""
        return self._get(BrokerSettings, f"{BROKERS}/{segment(name)}/config").settings

    def update_broker_config(self, name: str, settings: Mapping[str, str]) -> BrokerView:
        """Set some of broker `name`'s settings (the others stay): its disk quota settings take effect at once;
        anything else restarts the broker with the new config (its old one stays if the new one cannot open)."""
        change = {"settings": {str(key): str(value) for key, value in settings.items()}}
        return model_of(BrokerView, self._client.request("PATCH", f"{BROKERS}/{segment(name)}/config", json=change))

    def promote(self, name: str, role: MasterRole | str = "SYNC_MASTER") -> BrokerView:
        """Make broker `name` (a slave) a master: `brokerRole=role`, `brokerId=0`; the broker restarts as one."""
        role = str(role).upper()
        if role not in MASTER_ROLES:
            raise InvalidArgument(f"a broker is promoted to SYNC_MASTER or ASYNC_MASTER, not {role!r}")
        return self.update_broker_config(name, {"brokerRole": role, "brokerId": "0"})
