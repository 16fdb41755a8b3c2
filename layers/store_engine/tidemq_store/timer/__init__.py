"""Delay and timer messages: api.py has the protocol every backend keeps, plan.py what a put on a DELAY topic becomes;
the stores are embedded/timers.py (RocksDB) and serverless/timers.py (DynamoDB), each with its crash-safety
argument. docs/timers.md is the user's page."""
