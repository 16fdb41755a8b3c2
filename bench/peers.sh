#!/usr/bin/env bash
# TideMQ in the peer broker benchmark (../shared/bench/peers): NATS JetStream, Redis Streams, RabbitMQ
# streams and TideMQ, one after the other, on this machine. Flags go to the harness, e.g.
#   bench/peers.sh -n 100000 --repeat 3
# The harness installs the brokers' Debian packages if missing (needs root) and their Python clients
# into the venv .venv-peers, into which this script installs TideMQ too.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HARNESS="${PEERS_HARNESS:-$ROOT/../shared/bench/peers}"
VENV="${VENV:-$ROOT/.venv-peers}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT/shared/tidemq" -e "$ROOT"  # the client, then the server
cd "$ROOT"
VENV="$VENV" exec "$HARNESS/run_peers.sh" --plugin "$ROOT/bench/peer_tidemq.py" \
  --peers "${PEERS:-nats,redis,rabbitmq,tidemq}" "$@"
