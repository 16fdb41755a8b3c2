"""The local gateway on a disk whose fsync fails on demand, for the fsync-failure tests.

    python failing_disk_gateway.py      # settings as for `python -m servers.gateway`

Once the file named by TIDEMQ_TEST_FAIL_FSYNC exists, every os.fsync and os.fdatasync in this process raises
EIO, as Linux reports a writeback error (the kernel's own fsync, not a mock of TideMQ's code).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from servers.gateway.app import main

TRIGGER = Path(os.environ["TIDEMQ_TEST_FAIL_FSYNC"])


def failing_when_triggered(sync):
    def sync_or_fail(fd: int) -> None:
        if TRIGGER.exists():
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        sync(fd)

    return sync_or_fail


os.fsync = failing_when_triggered(os.fsync)
os.fdatasync = failing_when_triggered(os.fdatasync)

if __name__ == "__main__":
    main()
