"""How the console shows a message body (text, JSON, hex) and exports messages (JSON lines, CSV): one place for both
the message browser and the dead letters."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from tidemq_protocol.api.messages import MessageView
from tidemq_protocol.errors import InvalidArgument

from .web import Answer

VIEWS = ("text", "json", "hex")
SHOWN_BYTES = 16 * 1024
CSV_COLUMNS = (
    "msg_id",
    "topic",
    "queue",
    "offset",
    "keys",
    "tag",
    "born_timestamp",
    "store_timestamp",
    "body_encoding",
    "body",
    "properties",
)


def shown_body(message: MessageView, view: str) -> str:
    """The body as `view` shows it (the first SHOWN_BYTES; a body that is not JSON shown as text, saying so)."""
    raw = message.body_bytes()
    cut = raw[:SHOWN_BYTES]
    more = f"\n… {len(raw) - SHOWN_BYTES} more bytes" if len(raw) > SHOWN_BYTES else ""
    if view == "hex":
        return "\n".join(cut[i : i + 16].hex(" ") for i in range(0, len(cut), 16)) + more
    if view == "json":
        try:
            return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)[: SHOWN_BYTES * 2] + more
        except ValueError:
            return "(not JSON) " + cut.decode("utf-8", "replace") + more
    if message.body_encoding != "utf-8":
        return f"(binary: {len(raw)} bytes; see hex) " + cut.decode("utf-8", "replace") + more
    return cut.decode("utf-8", "replace") + more


def export_answer(messages: Sequence[MessageView], form: str, name: str) -> Answer:
    """The messages as a download: `jsonl` (one MessageView a line, as the HTTP API shows it) or `csv`."""
    if form == "jsonl":
        body = "".join(m.model_dump_json() + "\n" for m in messages)
        content_type = "application/x-ndjson"
    elif form == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for m in messages:
            row = m.model_dump()
            row["keys"], row["properties"] = " ".join(m.keys), json.dumps(m.properties)
            writer.writerow([row.get(column) for column in CSV_COLUMNS])
        body, content_type = out.getvalue(), "text/csv; charset=utf-8"
    else:
        raise InvalidArgument(f"an export is jsonl or csv, not {form[:20]!r}")
    disposition = f'attachment; filename="{name}.{form}"'
    return Answer(200, body, content_type, headers={"content-disposition": disposition})
