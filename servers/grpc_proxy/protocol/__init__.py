"""RocketMQ 5's gRPC protocol (apache/rocketmq-apis, `apache.rocketmq.v2`) as the proxy speaks it: the generated
message classes (`definition_pb2`, `service_pb2`) and the name the service is served under.

How TideMQ gets its stubs, and why this way:
- `rocketmq-python-client` ships generated stubs (with a servicer base class) but no .proto files, and stubs
  generated separately for the same proto package cannot be imported in the same process as the client's: the
  protobuf runtime refuses a second definition of `apache.rocketmq.v2.Message` ("duplicate symbol").
- Importing the client's stubs would make the server depend on a client distribution (OpenTelemetry and all), pin
  the protocol to whatever that client last generated, and tie the proxy's protobuf to the client's.
- So the .proto files are vendored unchanged (`upstream/`: rocketmq-apis as the npm package
  `rocketmq-client-nodejs` ships them, Apache-2.0), and `devtools/rocketmq_protos.py` (`make protos`) generates these
  modules with the proto package renamed to `tidemq.rocketmq.v2` and their own file names. A package name never
  travels on the wire, so the bytes are RocketMQ's; the proxy serves the methods under the real service name
  (`SERVICE`, server.py builds the handlers from the service descriptor), so clients call the paths they know. The
  modules coexist with the client's in one process, and a unit test checks they are what generation gives.
The server depends on grpcio and protobuf only; the client is a test dependency (the dev extra).
"""

from __future__ import annotations

from . import definition_pb2, service_pb2

SERVICE = "apache.rocketmq.v2.MessagingService"
"""The service's name on the wire (the methods' paths are /<SERVICE>/<method>)."""
MESSAGING_SERVICE = service_pb2.DESCRIPTOR.services_by_name["MessagingService"]
"""The service's descriptor: its methods, their message types and whether each streams."""

__all__ = ["MESSAGING_SERVICE", "SERVICE", "definition_pb2", "service_pb2"]
