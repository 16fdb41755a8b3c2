"""Long-running servers that serve the Lambda handlers (functions/) unchanged: the local gateway, the
BrokerContainer, and what they share (the HTTP-to-event adapter, start-up, process control)."""
