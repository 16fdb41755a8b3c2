"""A consumer group's retry policy (RocketMQ 5's `RetryPolicy`): how many deliveries a message gets before it goes to
the group's dead letters `%DLQ%<group>`, and how long each redelivery waits.

    max_delivery_attempts   deliveries in all (RocketMQ's maxDeliveryAttempts, default 16); after the last one
                            fails, the message is dead-lettered and the group moves on
    backoff                 the wait before delivery attempt + 1, after `attempt` deliveries failed:
        exponential         initial_ms x multiplier^(attempt - 1), at most max_ms
        customized          delays_ms[attempt - 1], the last one repeated (RocketMQ's CustomizedBackoff; its default
                            list is ROCKETMQ_DELAYS_MS, 1s 5s 10s 30s 1m 2m ... 2h)

Push delivery waits the backoff before it calls a target again with a failed batch; a pop consumer's `nack` (a
release without a delay of its own) makes the message visible again after it. A message a pop consumer neither acks
nor gives back comes back when its invisible time ends, whatever the backoff.

The policy is also written as text, for the command line and the settings (`Backoff.parse`):
`exponential:1s,2,5m` (initial, multiplier, max) and `customized:1s,5s,10s,30s` (the delays); durations are
milliseconds, or a number with `ms`, `s`, `m` or `h`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError

from .api.common import json_integer
from .errors import InvalidArgument
from .limits import HOUR_MS

MAX_DELAY_MS = 24 * HOUR_MS
"""The longest wait a backoff may ask for (RocketMQ's customized delays go up to 2 h)."""
MAX_DELAYS = 64
MAX_DELIVERY_ATTEMPTS = 1000

ROCKETMQ_DELAYS_MS = (
    1_000, 5_000, 10_000, 30_000,
    *(minutes * 60_000 for minutes in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 60, 120)),
)  # fmt: skip
"""RocketMQ's default delay levels (`messageDelayLevel`): 1s 5s 10s 30s 1m 2m 3m ... 10m 20m 30m 1h 2h."""

Attempts = Annotated[Annotated[int, Field(ge=1, le=MAX_DELIVERY_ATTEMPTS)], BeforeValidator(json_integer)]
KIND_REQUIRED = {"required": ["kind"]}
"""In JSON a backoff says its kind (the discriminator); in Python each class has its own as a default."""
DelayMs = Annotated[Annotated[int, Field(ge=0, le=MAX_DELAY_MS)], BeforeValidator(json_integer)]


class ExponentialBackoff(BaseModel):
    """Wait initial_ms x multiplier^(attempt - 1) after `attempt` failed deliveries, at most max_ms."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=KIND_REQUIRED)

    kind: Literal["exponential"] = "exponential"
    initial_ms: DelayMs = Field(default=1_000, description="The wait after the first failed delivery.")
    multiplier: Annotated[float, BeforeValidator(json_number)] = Field(
        default=2.0, ge=1.0, le=100.0, description="Each next wait is this many times longer."
    )
    max_ms: DelayMs = Field(default=300_000, description="The longest wait (below initial_ms: every wait).")

    def delay_ms(self, attempt: int) -> int:
        if self.multiplier == 1 or self.initial_ms == 0:
            return min(self.initial_ms, self.max_ms)
        delay = float(self.initial_ms)
        for _ in range(attempt - 1):  # stops as soon as the wait reaches max_ms (no float overflow)
            if delay >= self.max_ms:
                break
            delay *= self.multiplier
        return int(min(delay, self.max_ms))

    def text(self) -> str:
        return f"exponential:{self.initial_ms}ms,{self.multiplier:g},{self.max_ms}ms"


class CustomizedBackoff(BaseModel):
    """Wait delays_ms[attempt - 1] after `attempt` failed deliveries, the last delay once they run out."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=KIND_REQUIRED)

    kind: Literal["customized"] = "customized"
    delays_ms: tuple[DelayMs, ...] = Field(default=ROCKETMQ_DELAYS_MS, min_length=1, max_length=MAX_DELAYS)

    def delay_ms(self, attempt: int) -> int:
        return self.delays_ms[min(attempt, len(self.delays_ms)) - 1]

    def text(self) -> str:
        return "customized:" + ",".join(f"{delay}ms" for delay in self.delays_ms)


def json_number(value: object) -> object:
    """A JSON number, never `true` or a string of digits (which pydantic's lax mode would take for one)."""
    if isinstance(value, bool | str):
        raise ValueError("Input should be a valid number")
    return value


Backoff = Annotated[ExponentialBackoff | CustomizedBackoff, Field(discriminator="kind")]
BACKOFF = TypeAdapter(Backoff)
DURATION = re.compile(r"(\d+)(ms|s|m|h)?")
UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "h": HOUR_MS}
BACKOFF_FORMS = (
    "exponential:INITIAL,MULTIPLIER,MAX (e.g. exponential:1s,2,5m) or customized:D1,D2,... (e.g. customized:1s,5s,1m)"
)


def duration_ms(text: str) -> int:
    """Milliseconds of `1500`, `1500ms`, `10s`, `5m` or `2h` (InvalidArgument otherwise)."""
    found = DURATION.fullmatch(text.strip())
    if found is None:
        raise InvalidArgument(f"{text!r} is not a duration: milliseconds, or a number with ms, s, m or h")
    return int(found[1]) * UNIT_MS[found[2]]


@lru_cache(maxsize=64)  # the settings' default is parsed for each pop request: once is enough (backoffs are frozen)
def parse_backoff(text: str) -> ExponentialBackoff | CustomizedBackoff:
    """The backoff `text` writes (see the module docstring); InvalidArgument saying what is wrong."""
    kind, _, rest = text.strip().partition(":")
    parts = [part for part in rest.split(",") if part.strip()]
    try:
        if kind == "exponential" and len(parts) == 3:
            initial, multiplier, most = parts
            try:
                factor = float(multiplier)
            except ValueError:
                raise InvalidArgument(f"backoff multiplier {multiplier!r} is not a number") from None
            data = {"kind": kind, "initial_ms": duration_ms(initial), "multiplier": factor, "max_ms": duration_ms(most)}
        elif kind == "customized" and parts:
            data = {"kind": kind, "delays_ms": [duration_ms(part) for part in parts]}
        else:
            raise InvalidArgument(f"backoff {text!r} must be {BACKOFF_FORMS}")
        return BACKOFF.validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        raise InvalidArgument(f"backoff {text!r}: {'.'.join(map(str, first['loc'][1:]))} {first['msg']}") from None


class RetryPolicy(BaseModel):
    """A group's retry policy (see the module docstring). A field left None is the server's default
    (TIDEMQ_MAX_DELIVERY_ATTEMPTS, TIDEMQ_RETRY_BACKOFF): `over` fills them in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_delivery_attempts: Attempts | None = Field(
        default=None,
        description="Deliveries of a message before it goes to the group's dead letters (null: the server's, 16).",
    )
    backoff: Backoff | None = Field(
        default=None,
        description="The wait before the next delivery after a failed one: push retries, pop nacks (null: the "
        "server's, RocketMQ's customized delays).",
    )

    def over(self, defaults: RetryPolicy) -> RetryPolicy:
        """This policy with the fields it leaves None taken from `defaults`."""
        return RetryPolicy(
            max_delivery_attempts=self.max_delivery_attempts or defaults.max_delivery_attempts,
            backoff=self.backoff or defaults.backoff,
        )

    @property
    def attempts(self) -> int:
        """max_delivery_attempts of a policy with the defaults filled in (`over`)."""
        if self.max_delivery_attempts is None:
            raise ValueError("a retry policy without max_delivery_attempts has no defaults applied")
        return self.max_delivery_attempts

    def delay_ms(self, attempt: int) -> int:
        """The wait before delivery `attempt` + 1, after `attempt` deliveries failed (a policy from `over`)."""
        if self.backoff is None:
            raise ValueError("a retry policy without backoff has no defaults applied")
        return self.backoff.delay_ms(max(attempt, 1))
