"""TideMQ's Python SDK: Producer, Consumer and Admin over the HTTP API."""
