"""The jobs, each a `spark-submit` entry point (`python -m spark_emr.jobs.<job> --help` lists its arguments)."""
