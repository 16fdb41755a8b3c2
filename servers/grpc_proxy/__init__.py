"""The RocketMQ 5 gRPC proxy: Apache RocketMQ 5's clients (Java, Go, Python, Node.js, ...) unchanged, over the same
logic and store as the HTTP API (docs/rocketmq-clients.md).

    protocol/         RocketMQ's .proto files and the modules generated from them (why this way: its docstring)
    server.py         the grpc.aio server, started beside the local gateway's HTTP
    __main__.py       `python -m servers.grpc_proxy`: the server alone (the CDK app's Fargate tasks run it)
    service.py        the MessagingService: each RPC a thin translation into functions/logic
    messages.py       RocketMQ messages <-> TideMQ's;  routes.py: queues and assignments
    client_settings.py  the Settings a client's Telemetry gets;  clients.py: the open Telemetry streams
    auth.py           MQv2-HMAC-SHA1 onto TideMQ's users;  status.py: TideMQ errors -> RocketMQ codes
"""
