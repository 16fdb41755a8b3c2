"""How the CLI shows things: tables on stdout (rich), messages as JSON lines, durations and times."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from tidemq_protocol.api.messages import MessageView
from tidemq_protocol.message import StoredMessage

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False)

_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))


def duration(ms: int | None) -> str:
    """A retention as people write it: None -> "forever", 259200000 -> "3d", 90000 -> "90s"."""
    if ms is None:
        return "forever"
    for unit, size in _UNITS:
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def timestamp(ms: int) -> str:
    """A time in ms since the epoch as local ISO 8601, to the second."""
    return dt.datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="seconds")


def table(*columns: str, numeric: Sequence[str] = ()) -> Table:
    """A plain table; `numeric` columns are right-aligned."""
    grid = Table(box=None, pad_edge=False, header_style="bold")
    for name in columns:
        grid.add_column(name, justify="right" if name in numeric else "left")
    return grid


def message_json(message: StoredMessage | MessageView) -> str:
    """One message as one JSON line: topic, queue, offset, msg_id, body (utf-8, else base64 with
    body_encoding), keys, tag, properties, born and store timestamps."""
    view = MessageView.of(message) if isinstance(message, StoredMessage) else message
    return view.model_dump_json()
