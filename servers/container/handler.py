"""The container's admin API, served on the container's own path, `/container/v1` (RocketMQ's ADD_BROKER,
REMOVE_BROKER, GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG), and the replica route a slave pulls from.

Each route needs an action on `Cluster:*` (super users have them all): List or Get to look, Create to add a broker,
Delete to remove one, Update to change a config (a promotion included), Sub to pull a master's commit log.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from functions.api.auth import require, require_any
from functions.api.binary import binary_response
from functions.api.errors import responses
from functions.api.resolver import lambda_entry, new_resolver
from tidemq_protocol.acl import CLUSTER, Action
from tidemq_protocol.api.container import BrokerAdd, BrokerList, BrokerSettings, BrokerView
from tidemq_protocol.errors import ReplicaDiverged
from tidemq_protocol.limits import MIB
from tidemq_store.embedded.replica import CONTENT_TYPE

from .broker import Broker
from .config import BROKER_NAME
from .state import container

app = new_resolver()
BrokerInPath = Annotated[str, Path(pattern=f"^{BROKER_NAME.pattern}$", description="The broker's name.")]
MAX_WAIT_MS = 5_000


def view(broker: Broker) -> BrokerView:
    return BrokerView.model_validate(broker.describe())


@app.get("/container/v1/brokers", tags=["container"], responses=responses())
def list_brokers() -> BrokerList:
    """Every broker of the container, with its role, disk usage and quota, and replication."""
    require_any(CLUSTER, Action.LIST, Action.GET)
    return BrokerList(brokers=[view(broker) for broker in container().brokers()])


@app.post("/container/v1/brokers", status_code=201, tags=["container"], responses=responses(415, 400, 409, ok=201))
def add_broker(request: BrokerAdd) -> BrokerView:
    """Add a broker from the text of its config file; its store opens (and recovers) before this answers."""
    require((CLUSTER, Action.CREATE))
    return view(container().add(request.properties))


@app.get("/container/v1/brokers/<broker>", tags=["container"], responses=responses(404))
def get_broker(broker: BrokerInPath) -> BrokerView:
    require_any(CLUSTER, Action.GET, Action.LIST)
    return view(container().get(broker))


@app.delete("/container/v1/brokers/<broker>", tags=["container"], responses=responses(404, ok=204))
def remove_broker(broker: BrokerInPath):
    """Remove a broker: it stops taking requests, finishes those in flight, flushes and closes; its files stay."""
    require((CLUSTER, Action.DELETE))
    container().remove(broker)
    return Response(204)


@app.get("/container/v1/brokers/<broker>/config", tags=["container"], responses=responses(404))
def get_broker_config(broker: BrokerInPath) -> BrokerSettings:
    """The broker's settings as its config file gives them (secret keys hidden)."""
    require((CLUSTER, Action.GET))
    return BrokerSettings(settings=container().config_of(broker))


@app.patch("/container/v1/brokers/<broker>/config", tags=["container"], responses=responses(415, 400, 404, 409))
def update_broker_config(broker: BrokerInPath, change: BrokerSettings) -> BrokerView:
    """Set some of the broker's settings: quota settings at once, anything else by restarting the broker with the
    new config (`brokerRole=SYNC_MASTER` promotes a slave)."""
    require((CLUSTER, Action.UPDATE))
    return view(container().update(broker, change.settings))


@app.get(
    "/container/v1/brokers/<broker>/replica",
    tags=["container"],
    responses=responses(
        404,
        409,
        ok_content={CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        description="The next chunk of the master's commit log (tidemq_store/embedded/replica.py).",
    ),
)
def replica(
    broker: BrokerInPath,
    position: Annotated[int, Query(alias="from", ge=0, description="Where the slave's log ends.")],
    max_bytes: Annotated[int, Query(ge=1, le=64 * MIB)] = 4 * MIB,
    wait_ms: Annotated[int, Query(ge=0, le=MAX_WAIT_MS)] = 0,
):
    """What a slave pulls: its asking from `from` says it holds everything below it."""
    require((CLUSTER, Action.SUB))
    master = container().get(broker)
    if master.master is None:
        raise ReplicaDiverged(f"broker {broker!r} is a slave: its slaves pull from its master")
    with master.serving():  # counted in flight: removing the broker waits for it
        if position > master.hot.written_position:  # never taken as an acknowledgement of what the master lacks
            master.hot.read_replica(position, max_bytes)  # ReplicaDiverged, saying where each log ends
        master.master.slave_asked(position)
        if wait_ms:
            master.master.wait_for_data(position, wait_ms / 1000)
        chunk = master.hot.read_replica(position, max_bytes)
    return binary_response(chunk.encode(), CONTENT_TYPE, app.current_event)


lambda_handler = lambda_entry(app)
