"""The BrokerContainer's two kinds of config file, in RocketMQ's format: Java properties (`key=value` lines, `#` and
`!` comments), keys in camelCase with RocketMQ's names where RocketMQ has them.

The container's (`tidemq container -c broker-container.conf`):

    listenPort=10811                 the one port every broker is served on (TIDEMQ_PORT otherwise)
    grpcServerPort=10812             RocketMQ 5's gRPC, every broker's, by the client's namespace (TIDEMQ_GRPC_PORT)
    brokerContainerIP=127.0.0.1      the address it listens on (TIDEMQ_HOST otherwise)
    storePathRootDir=/data/tidemq    its own directory: users, auth key, logs, brokers' default stores (TIDEMQ_HOME)
    brokerConfigPaths=/etc/tidemq/broker-a.conf:/etc/tidemq/broker-b.conf    ':'-separated; none: start empty

A broker's: its identity and role, its store, its disk quota, where its master is (a slave), whether it logs to a
file of its own; and any store setting (`StoreConfig`) by its camelCase name (`flushDiskType`, `tier`, ...), with
RocketMQ's names for those RocketMQ has (`storePathRootDir`, `mappedFileSizeCommitLog`, `flushIntervalCommitLog`,
`maxMessageSize`, `tieredStorageLevel`). A broker's settings come from its file alone, never from the container's
environment. Keys of the transport and name server (`listenPort`, `namesrvAddr`, `brokerIP1`, ...) are the
container's in container mode (as in RocketMQ): a broker file may hold them, and they are ignored. An unknown key,
a bad value, or a store directory outside the container's own (for a broker added over the API) is refused, saying
which.
"""

from __future__ import annotations

import logging
import re
from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from tidemq_protocol.errors import InvalidArgument
from tidemq_store.config import Backend, StoreConfig

log = logging.getLogger("tidemq.container")

BROKER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
RENAMED = {  # RocketMQ's name -> StoreConfig's field
    "storePathRootDir": "home",
    "mappedFileSizeCommitLog": "commitlog_segment_bytes",
    "flushIntervalCommitLog": "flush_interval_ms",
    "maxMessageSize": "max_message_bytes",
    "tieredStorageLevel": "tier_level",
}
TRANSPORT_KEYS = frozenset(
    {
        "listenPort",
        "grpcServerPort",
        "namesrvAddr",
        "fetchNamesrvAddrByAddressServer",
        "brokerIP1",
        "brokerIP2",
        "brokerContainerIP",
    }
)
SECRET_KEYS = frozenset({"haMasterSecretKey"})
DEFAULT_LISTEN_PORT = 10811


class BrokerRole(StrEnum):
    """RocketMQ's brokerRole: a master acknowledges a put once its slave has it (SYNC_MASTER) or at once
    (ASYNC_MASTER); a slave copies its master's commit log and serves reads."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def parse_properties(text: str, source: str) -> dict[str, str]:
    """`key=value` (or `key: value`) lines of a Java properties file, comments and blank lines left out."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        pair = re.fullmatch(r"([^=:\s]+)\s*[=:]\s*(.*)", line)
        if pair is None:
            raise InvalidArgument(f"{source}, line {number}: {raw!r} is not key=value")
        values[pair[1]] = pair[2].strip()
    return values


def to_properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


def field_name(key: str, renamed: dict[str, str]) -> str:
    """The settings field a camelCase key names."""
    return renamed.get(key) or re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def _fields(values: dict[str, str], model: type[BaseSettings], source: str) -> dict[str, str]:
    """The model's fields named by `values`' keys: unknown keys refused, the transport's ignored."""
    fields: dict[str, str] = {}
    for key, value in values.items():
        if key in TRANSPORT_KEYS and model is BrokerConfig:
            log.info("%s: %s is the container's in container mode; ignored here", source, key)
            continue
        name = field_name(key, RENAMED if model is BrokerConfig else {})
        if name not in model.model_fields or "_" in key:
            raise InvalidArgument(f"{source}: unknown setting {key!r}")
        fields[name] = value
    return fields


def _validated(model: type[BaseSettings], fields: dict, source: str):
    try:
        return model(**fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        key = next((k for k, f in RENAMED.items() if f == where), re.sub(r"_(\w)", lambda m: m[1].upper(), where))
        message = first["msg"].removeprefix("Value error, ")
        raise InvalidArgument(f"{source}: {key}: {message}" if key else f"{source}: {message}") from None


class FileSettings(BaseSettings):
    """Settings from a config file alone: no environment variable reaches them."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        **_: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


class ContainerConfig(FileSettings):
    """broker-container.conf (see the module docstring); what it leaves out comes from the process's settings."""

    listen_port: int | None = Field(default=None, ge=0, le=65535)
    grpc_server_port: int | None = Field(default=None, ge=0, le=65535)
    broker_container_ip: str | None = None
    store_path_root_dir: Path | None = None
    broker_config_paths: str = ""

    @property
    def broker_files(self) -> list[Path]:
        return [Path(path) for path in self.broker_config_paths.split(":") if path.strip()]

    @classmethod
    def read(cls, path: Path) -> ContainerConfig:
        source = str(path)
        try:
            text = path.read_text()
        except OSError as error:
            raise InvalidArgument(f"cannot read the container config {source}: {error.strerror}") from None
        config = _validated(cls, _fields(parse_properties(text, source), cls, source), source)
        # relative broker config paths are relative to the container's config file
        files = [str(file if file.is_absolute() else path.parent / file) for file in config.broker_files]
        return config.model_copy(update={"broker_config_paths": ":".join(files)})


class BrokerConfig(FileSettings, StoreConfig):
    """A broker's config file (see the module docstring)."""

    broker_cluster_name: str = Field(default="DefaultCluster", pattern=BROKER_NAME.pattern)
    broker_name: str = Field(pattern=BROKER_NAME.pattern, description="The broker's name, unique in its container.")
    broker_id: int = Field(default=0, ge=0, description="0 for a master, more for a slave (RocketMQ's brokerId).")
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    quota_percent_for_disk_partition: float = Field(
        default=1.0, gt=0, le=1, description="The share of its disk partition the broker's messages may take."
    )
    logical_disk_space_clean_forcibly_threshold: float = Field(
        default=0.8, gt=0, le=1, description="Past this share of its quota, the broker frees space (quota < 1 only)."
    )
    clean_resource_interval: int = Field(default=10_000, ge=10, description="ms between disk quota checks.")
    isolate_log_enable: bool = Field(default=False, description="Log to a file of the broker's own.")
    ha_master_address: str | None = Field(
        default=None,
        pattern=r"^https?://[^/\s]+/?$",
        description="A slave's master: the base URL of the container holding it (the master has the slave's name).",
    )
    ha_master_access_key: str | None = None
    ha_master_secret_key: SecretStr | None = None
    sync_flush_timeout: int = Field(
        default=5000,
        ge=1,
        description="SYNC_MASTER: how long a put waits for its slave (ms), then FLUSH_SLAVE_TIMEOUT.",
    )
    ha_housekeeping_interval: int = Field(
        default=20_000, ge=100, description="A slave not heard from this long (ms) is gone: SLAVE_NOT_AVAILABLE."
    )

    @model_validator(mode="after")
    def _consistent(self) -> BrokerConfig:
        if self.backend is not Backend.EMBEDDED:
            raise ValueError("a container's brokers use the embedded engine (backend=embedded)")
        slave = self.broker_role is BrokerRole.SLAVE
        if slave != (self.broker_id > 0):
            raise ValueError("brokerId is 0 for a master and more than 0 for a slave (brokerRole)")
        if slave and not (self.ha_master_address and self.ha_master_access_key and self.ha_master_secret_key):
            raise ValueError("a slave needs haMasterAddress, haMasterAccessKey and haMasterSecretKey")
        return self

    @property
    def identity(self) -> str:
        """RocketMQ's canonical name of a broker: cluster_name_id."""
        return f"{self.broker_cluster_name}_{self.broker_name}_{self.broker_id}"

    @property
    def is_slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    @classmethod
    def parse(cls, properties: str, source: str, root: Path, confined: bool) -> tuple[BrokerConfig, dict[str, str]]:
        """A broker's config from the text of its file, and its key/values. A relative `storePathRootDir` is under
        `root` (the container's directory: `<root>/brokers/<brokerName>` by default); `confined`, a directory
        outside it is refused (a broker added over the API must not write elsewhere)."""
        values = parse_properties(properties, source)
        fields = _fields(values, cls, source)
        name = fields.get("broker_name", "")
        if not BROKER_NAME.fullmatch(name):
            raise InvalidArgument(f"{source}: brokerName must be 1 to 64 letters, digits, '_' or '-', got {name!r}")
        home = Path(fields.get("home") or Path("brokers") / name)
        home = (home if home.is_absolute() else root / home).resolve()
        if confined and not home.is_relative_to(root.resolve()):
            raise InvalidArgument(f"{source}: storePathRootDir {home} is outside the container's directory {root}")
        fields["home"] = str(home)
        if "flush_disk_type" in fields:  # RocketMQ's values: SYNC_FLUSH, ASYNC_FLUSH
            fields["flush_disk_type"] = fields["flush_disk_type"].removesuffix("_FLUSH")
        return _validated(cls, fields, source), values

    @classmethod
    def read(cls, path: Path, root: Path) -> tuple[BrokerConfig, dict[str, str]]:
        try:
            text = path.read_text()
        except OSError as error:
            raise InvalidArgument(f"cannot read the broker config {path}: {error.strerror}") from None
        return cls.parse(text, str(path), root, confined=False)


def shown(values: dict[str, str]) -> dict[str, str]:
    """A broker's settings as the admin API shows them: secrets hidden."""
    return {key: ("********" if key in SECRET_KEYS else value) for key, value in values.items()}
