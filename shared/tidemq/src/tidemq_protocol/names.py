"""The names of topics and consumer groups: RocketMQ's rule, its check, and the pydantic types that apply it."""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated

from pydantic import AfterValidator

from .errors import InvalidName

NAME_RULE = re.compile(r"[A-Za-z0-9_%|-]{1,127}")
"""RocketMQ's rule for topic and group names: letters, digits, `_ % | -`, at most 127 characters."""


def check_name(kind: str, name: object) -> str:
    """Return `name` if it is a valid topic/group name, else raise `InvalidName` saying why."""
    if not isinstance(name, str):
        raise InvalidName(f"{kind} name must be a string, got {type(name).__name__}")
    if not NAME_RULE.fullmatch(name):
        if not name:
            raise InvalidName(f"{kind} name must not be empty")
        if len(name) > 127:
            raise InvalidName(f"{kind} name is {len(name)} characters long; the limit is 127")
        bad = sorted({c for c in name if not NAME_RULE.fullmatch(c)})
        raise InvalidName(f"{kind} name {name!r} has characters outside [A-Za-z0-9_%|-]: {''.join(bad)!r}")
    return name


TopicName = Annotated[str, AfterValidator(partial(check_name, "topic"))]
GroupName = Annotated[str, AfterValidator(partial(check_name, "group"))]
