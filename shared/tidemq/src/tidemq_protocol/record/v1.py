"""Version 1 of the commit-log record (magic 0xD1): read, never written since version 2.

    offset size  field
       0     4   total_size        bytes in the whole record, this field included
       4     1   magic             0xD1
       5     4   crc               CRC32C of bytes [9, total_size)
       9     1   flags             as in version 2 (bit 0: END_OF_BATCH)
      10     4   queue
      14     8   queue_offset
      22     8   physical_offset
      30     8   born_timestamp
      38     8   store_timestamp
      46     1   topic_length      T
      47     2   properties_length P
      49     4   body_length       B
      53     T   topic             UTF-8
    53+T     P   properties        as in version 2 (`properties.py`)
  53+T+P     B   body

total_size = 53 + T + P + B. One CRC covers everything after it, the broker's fields included, so a record's
queue offset cannot change without a new CRC over all of it (`write_queue_offset`: the serverless backend gives
old records their offsets as it reads them, as it does version 2's). tests/legacy_records.py writes these records
as the code before version 2 did, for tests.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

MAGIC = 0xD1
HEADER = struct.Struct("<IBIBIQQQQBHI")  # the table's fields, in order
HEADER_SIZE = HEADER.size  # 53
CRC_AT, CRC_START = 5, 9
QUEUE_OFFSET_AT, PHYSICAL_AT, STORE_TIMESTAMP_AT = 14, 22, 38
TOPIC_LENGTH_AT = 46  # topic_length, then properties_length
_CRC = struct.Struct("<I")
_OFFSET = struct.Struct("<Q")


def write_queue_offset(record: memoryview, position: int, size: int, queue_offset: int) -> None:
    """Give the version 1 record of `size` bytes at `position` the queue offset `queue_offset`, and its CRC the
    new value."""
    _OFFSET.pack_into(record, position + QUEUE_OFFSET_AT, queue_offset)
    _CRC.pack_into(record, position + CRC_AT, crc32c(record[position + CRC_START : position + size]))
