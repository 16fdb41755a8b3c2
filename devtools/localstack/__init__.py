"""LocalStack as the local AWS, with no Docker and no account: installed on first use (`install`), started in host
mode on a free loopback port with its files under TIDEMQ_HOME, and stopped together with every process it started
(`server`).

    python -m devtools.localstack install    # first-use setup (a few minutes the first time; then instant)
    python -m devtools.localstack serve      # LocalStack in the foreground until Ctrl-C or SIGTERM
"""

from .install import Installation, install
from .report import LocalStackError
from .server import LocalStack

__all__ = ["Installation", "LocalStack", "LocalStackError", "install"]
