"""A broker's disk quota, as RIP-31 defines it.

The quota is `quotaPercentForDiskPartition` of the disk partition holding the broker's store; what counts against
it is the broker's commit log and ConsumeQueue (with its key index), nothing else. With a quota below 1, once that
passes `logicalDiskSpaceCleanForciblyThreshold` of the quota the broker frees space at once, before retention would:

- with a cold tier it reads back from, it removes its oldest commit-log segments, only those the tier holds whole
  (`TieredMessageStore.release_to_tier`): the messages stay readable, from the tier;
  while the tier has not yet taken enough to free, it goes on taking writes up to the quota itself, and refuses
  them past it;
- with no such tier, nothing else holds a copy, so it deletes nothing: it refuses new writes
  (`DiskQuotaExceeded`, a 507) until it is back under the threshold (retention, deleted topics, a larger quota).

Each check is logged when the state changes, shown by the admin API, and sent as the `DiskQuotaUsedRatio` metric.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from enum import StrEnum

from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from functions.observability import NAMESPACE
from tidemq_store import MessageStore
from tidemq_store.config import TieredStorageLevel
from tidemq_store.embedded import EmbeddedMessageStore
from tidemq_store.tiered import TieredMessageStore

from .config import BrokerConfig

log = logging.getLogger("tidemq.quota")


class QuotaState(StrEnum):
    OK = "ok"
    FREED = "freed"  # past the threshold, and segments in the tier were removed to get back under it
    WAITING_FOR_TIER = "waiting_for_tier"  # past the threshold; the tier holds too little yet to free enough
    REFUSING_WRITES = "refusing_writes"


@dataclass(frozen=True, slots=True)
class QuotaStatus:
    usage_bytes: int
    quota_bytes: int | None  # None: no quota (quotaPercentForDiskPartition = 1)
    threshold_bytes: int | None
    state: QuotaState
    segments_released: int = 0
    warning: str | None = None

    @property
    def refusing_writes(self) -> bool:
        return self.state is QuotaState.REFUSING_WRITES


def check_quota(config: BrokerConfig, store: MessageStore, hot: EmbeddedMessageStore) -> QuotaStatus:
    """Measure the broker's usage against its quota and act on it (see the module docstring)."""
    usage = hot.disk_usage()
    if config.quota_percent_for_disk_partition >= 1:
        return QuotaStatus(usage, None, None, QuotaState.OK)
    quota = int(shutil.disk_usage(config.home).total * config.quota_percent_for_disk_partition)
    threshold = int(quota * config.logical_disk_space_clean_forcibly_threshold)
    _metric(config, usage / quota)
    if usage <= threshold:
        return QuotaStatus(usage, quota, threshold, QuotaState.OK)
    released = 0
    if isinstance(store, TieredMessageStore) and config.tier_level is not TieredStorageLevel.DISABLE:
        released = store.release_to_tier(usage - threshold).segments_deleted
        usage = hot.disk_usage()
        if usage <= threshold:
            return QuotaStatus(usage, quota, threshold, QuotaState.FREED, released)
        past = f"{usage} bytes of messages are past {config.logical_disk_space_clean_forcibly_threshold:.0%} of the "
        past += f"broker's {quota}-byte disk quota ({config.quota_percent_for_disk_partition} of the partition)"
        if usage <= quota:
            warning = f"{past}; the cold tier does not yet hold enough of its oldest segments to free: writes go on "
            warning += "up to the quota itself"
            return QuotaStatus(usage, quota, threshold, QuotaState.WAITING_FOR_TIER, released, warning)
        warning = f"{past} and over the quota itself, and the cold tier does not yet hold enough to free: new writes "
        warning += "are refused until the tier catches up"
        return QuotaStatus(usage, quota, threshold, QuotaState.REFUSING_WRITES, released, warning)
    warning = (
        f"{usage} bytes of messages are past {config.logical_disk_space_clean_forcibly_threshold:.0%} of the "
        f"broker's {quota}-byte disk quota ({config.quota_percent_for_disk_partition} of the partition) and no "
        "cold tier holds a copy of them, so nothing is deleted: new writes are refused until it is back under it"
    )
    return QuotaStatus(usage, quota, threshold, QuotaState.REFUSING_WRITES, released, warning)


def _metric(config: BrokerConfig, ratio: float) -> None:
    if is_metrics_disabled():  # single_metric does not ask (locally the container sets it, as the gateway does)
        return
    with single_metric(
        name="DiskQuotaUsedRatio", unit=MetricUnit.Percent, value=round(ratio * 100, 2), namespace=NAMESPACE
    ) as metric:
        metric.add_dimension(name="Broker", value=config.identity)
