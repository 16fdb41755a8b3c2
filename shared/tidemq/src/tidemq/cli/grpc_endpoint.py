"""`tidemq grpc endpoint`: where the server's RocketMQ 5 gRPC proxy is, as a client snippet ready to paste."""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from ..client import HttpClient

SNIPPET = """\
# pip install rocketmq-python-client==5.1.2   (Apache RocketMQ 5's Python client, unchanged)
import os
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

config = ClientConfiguration("{endpoint}", Credentials("{access_key}", {secret}))

producer = Producer(config, ("orders",))         # the topic exists: tidemq topic create orders
producer.startup()
message = Message()
message.topic, message.body, message.tag = "orders", b"hello", "TagA"
print(producer.send(message).message_id)
producer.shutdown()

consumer = SimpleConsumer(config, "billing", {{"orders": FilterExpression("*")}})   # tidemq group create billing
consumer.startup()
for received in consumer.receive(32, 30):         # up to 32 messages, each held 30 s
    print(received.body)
    consumer.ack(received)
consumer.shutdown()
"""


@click.group()
def grpc() -> None:
    """RocketMQ 5 clients: the gRPC endpoint and a client snippet."""


@grpc.command("endpoint")
@click.option(
    "--port",
    envvar="TIDEMQ_GRPC_PORT",
    type=click.IntRange(1, 65535),
    default=8081,
    show_default=True,
    show_envvar=True,
    help="The proxy's port (the server's TIDEMQ_GRPC_PORT).",
)
@click.option("--show-secret", is_flag=True, help="Write the secret key into the snippet (else it reads an env var).")
@click.pass_obj
def endpoint(client: HttpClient, port: int, show_secret: bool) -> None:
    """Print the gRPC endpoint (the HTTP API's host, the proxy's port) and a Python client snippet using it, signed
    as this CLI's user."""
    credentials = client.credentials
    access_key = credentials.access_key if credentials else ""
    if show_secret and credentials:
        secret = repr(credentials.secret_key)
    else:
        secret = 'os.environ["TIDEMQ_SECRET_KEY"]' if credentials else '""'
    address = f"{urlsplit(client.url).hostname}:{port}"
    click.echo(f"# RocketMQ 5 gRPC endpoint: {address} (access key: {access_key or 'none: auth off'})")
    click.echo(SNIPPET.format(endpoint=address, access_key=access_key, secret=secret))
