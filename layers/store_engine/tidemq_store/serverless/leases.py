"""The maintenance runs' lease on a queue (its item's `uploading`): one run at a time uploads or expires a queue,
however runs overlap, so that one writer appends to the queue's tier files.

A lease is the time it ends, LEASE_S after it was taken, a value unique to the run that took it: a write of it whose
answer was lost and that botocore sent again finds it its own, and so does a give-back sent again.

A run that may have left a lease held when DynamoDB failed it (every attempt botocore made at taking the lease was
lost after it may have landed, or every attempt at giving it back failed) leaves a note of the lease on the shared
directory, `<efs>/leases/`, and the next run gives those back before it starts: a fault costs the queue one run, not
LEASE_S. Giving a noted lease back is safe because its run gave the queue up when it wrote the note, and it is
conditional on the lease's value, so a lease taken since by another run is left alone. Only a run killed while it
held a lease leaves it for LEASE_S, the longest a Lambda invocation lives.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from pathlib import Path

from pynamodb.exceptions import UpdateError

from .conditions import is_conditional
from .queue_index import QueueState, queue_key, state_of

log = logging.getLogger("tidemq.maintenance")
LEASE_S = 900.0  # a Lambda invocation's longest life: a run that held a queue this long is gone


class Leases:
    """Taking and giving back the lease of a queue in `queues` (the queues' table), with the notes of leases left
    held in `notes` (a directory every run shares)."""

    def __init__(self, queues, notes: Path) -> None:
        self.queues, self.notes = queues, notes

    def take(self, topic: str, queue: int) -> tuple[float, QueueState] | None:
        """Hold the queue: (the lease, the queue's state), or None when another run holds it or the queue is gone."""
        queues, item = self.queues, self.queues(queue_key(topic, queue))
        lease = time.time() + LEASE_S
        free = queues.uploading.does_not_exist() | (queues.uploading < time.time()) | (queues.uploading == lease)
        try:
            item.update(actions=[queues.uploading.set(lease)], condition=queues.next_offset.exists() & free)
        except UpdateError as error:
            if is_conditional(error):
                return None
            self.left_held(topic, queue, lease)  # it may have landed, its every answer lost
            raise
        return lease, state_of(item)

    def give_back(self, topic: str, queue: int, lease: float, hot: int, end: int, clean: bool) -> None:
        """Move the hot boundary to `hot` and release the lease; clear `dirty` too when `clean` and nothing arrived
        since `end`. A give-back whose answer was lost and that botocore sent again finds it done: the lease gone,
        the boundary moved."""
        queues, item = self.queues, self.queues(queue_key(topic, queue))
        held = (queues.uploading == lease) | (queues.uploading.does_not_exist() & (queues.hot_offset == hot))
        actions = [queues.hot_offset.set(hot), queues.uploading.remove()]
        if clean:
            with contextlib.suppress(UpdateError):
                item.update(actions=[*actions, queues.dirty.remove()], condition=held & (queues.next_offset == end))
                return
        item.update(actions=actions, condition=held)

    def release(self, topic: str, queue: int, lease: float, hot: int) -> None:
        """Move the hot boundary to `hot` and release the lease, leaving `dirty`: the end of a run that expired the
        queue or failed on it. A note of the lease when that fails too."""
        try:
            self.give_back(topic, queue, lease, hot, 0, clean=False)
        except UpdateError as error:
            if not is_conditional(error):  # conditional: it is not held with this lease any more
                self.left_held(topic, queue, lease)
            raise

    # ---- the notes -------------------------------------------------------------------------------

    def left_held(self, topic: str, queue: int, lease: float) -> None:
        """Note that this run may have left `lease` held on the queue, for the next run to give back."""
        note = {"topic": topic, "queue": queue, "lease": lease}
        try:
            self.notes.mkdir(parents=True, exist_ok=True)
            temporary = self.notes / f".{uuid.uuid4().hex}.tmp"
            temporary.write_text(json.dumps(note))
            os.replace(temporary, self.notes / f"{uuid.uuid4().hex}.json")
        except OSError:
            log.exception("the lease of %s may be left held until it ends in %.0f s", queue_key(topic, queue), LEASE_S)

    def left(self) -> bool:
        """Whether a run noted a lease it may have left held."""
        try:
            return any(self.notes.glob("*.json"))
        except OSError:
            return False

    def give_back_left(self) -> None:
        """Give back every lease a run noted it may have left held (its note goes once the lease is not held)."""
        try:
            paths = sorted(self.notes.glob("*.json"))
        except OSError:
            return
        queues = self.queues
        for path in paths:
            try:
                note = json.loads(path.read_text())
                item = self.queues(queue_key(note["topic"], note["queue"]))
                item.update(actions=[queues.uploading.remove()], condition=queues.uploading == note["lease"])
            except FileNotFoundError:
                continue  # another run gave it back
            except UpdateError as error:
                if not is_conditional(error):
                    log.warning("a lease left held on %s is still held: %s", path.name, error)
                    continue
            except ValueError:
                log.warning("an unreadable lease note %s is dropped", path.name)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
