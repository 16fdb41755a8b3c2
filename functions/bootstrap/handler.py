"""Bootstrap function: makes the first super user of a deployed TideMQ (locally the gateway does it at its first
start, servers/adapter.py).

An operator invokes it once, directly (`make first-user`, or `aws lambda invoke`; docs/deploy.md): no route of the
HTTP API reaches it, so only an IAM principal allowed `lambda:InvokeFunction` on it can. When the store has no user
yet it makes the super user `admin` and answers with its secret key, which is shown this once (the store keeps it
sealed); otherwise it makes nothing and says so. Nothing it answers is logged.
"""

from __future__ import annotations

from typing import Any

from functions.api.auth import secret_box
from functions.logic import users
from functions.observability import instrumented, logger
from functions.store import get_store


def make_first_user(event: dict[str, Any], context: Any) -> dict[str, Any]:
    created = users.bootstrap_super_user(get_store(), secret_box(), users.FIRST_SUPER_USER)
    if created is None:
        logger.info("the store has users already: no super user made")
        return {"created": False, "reason": "the store has users already: a super user makes others (tidemq user)"}
    logger.info("first super user made", extra={"user": created.name})
    return {"created": True, "user": created.name, "secret_key": created.secret_key}


lambda_handler = instrumented(make_first_user, count="Bootstraps")
