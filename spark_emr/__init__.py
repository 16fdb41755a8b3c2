"""PySpark jobs over the tiered segments: segment and key compaction, tier migration, retention.

Built by the Spark pipeline issue; jobs import the record format from `tidemq_store.record`.
"""
