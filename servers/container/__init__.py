"""The BrokerContainer (RIP-31): several brokers in one long-running process (a container, VM or ECS task instead of
Lambda), with disk quotas, log isolation and master/slave replication between containers. `python -m
servers.container -c broker-container.conf` (or `tidemq container -c ...`) runs one: server.py."""
