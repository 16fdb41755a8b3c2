"""PySpark jobs over the cold tier's segments (the Spark pipeline issue).

    session.py       the jobs' Spark session (local[2] here, EMR Serverless in AWS: the same code)
    tier.py          the Spark-side library: where a tier is, its queues, and each queue's messages read through
                     the engine's own tier container and record format (`tidemq_store`), never a copy of them
    jobs/export.py   a topic, or a time range of it, to Parquet

The driver lists; executors read and write S3 with boto3 inside partitions (`s3a://` needs jars this machine
cannot fetch, see ../shared/DESIGN.md), which runs unchanged on EMR.
"""
