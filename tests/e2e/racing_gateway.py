"""The local gateway with its threads switching often, for the tests that race requests against each other.

    python racing_gateway.py      # settings as for `python -m servers.gateway`

CPython hands the GIL from a running thread to a waiting one every 5 ms by default, so a handler that needs less
than that is seldom interrupted, and two requests seldom interleave inside the engine, where races are. Switching
every 0.1 ms (as tests/listing_race.py does in process) interleaves them at many more points: a race the gateway has
shows within seconds instead of once in many runs.
"""

from __future__ import annotations

import sys

from servers.gateway.app import main

SWITCH_INTERVAL_S = 0.0001

if __name__ == "__main__":
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    main()
