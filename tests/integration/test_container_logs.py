"""RIP-31's log isolation in a real container: a broker with `isolateLogEnable=true` logs to a file of its own,
`<root>/logs/<cluster>_<name>_<id>/broker.log`, and only its lines go there; the others' go to the container's."""

from __future__ import annotations

from tests.containers import container_running


def test_each_isolated_broker_logs_to_its_own_file_only(tmp_path):
    root = tmp_path / "root"
    brokers = {
        "a.conf": "brokerName=a\nisolateLogEnable=true\n",
        "b.conf": "brokerName=b\nbrokerClusterName=east\nisolateLogEnable=true\n",
        "c.conf": "brokerName=c\n",
    }
    with container_running(root, brokers) as container:
        for name in ("a", "b", "c"):
            container.broker(name).create_topic(f"topic-of-{name}", queues=1)
            client = container.client(f"/brokers/{name}")
            for _ in range(3):
                message = {"body": "x", "body_encoding": "utf-8"}
                client.request("POST", f"/v1/topics/topic-of-{name}/messages", json={"messages": [message]})
        container.client().request("DELETE", "/container/v1/brokers/b")  # its closing lines are its own too
    logs = root / "logs"
    files = {
        "a": (logs / "DefaultCluster_a_0" / "broker.log").read_text(),
        "b": (logs / "east_b_0" / "broker.log").read_text(),
        "container": (logs / "container.log").read_text(),
    }
    assert "broker a started" in files["a"] and files["a"].count("/v1/topics/topic-of-a/messages") == 3
    assert "broker b started" in files["b"] and "broker b closed" in files["b"]
    assert files["b"].count("/v1/topics/topic-of-b/messages") == 3
    assert "broker c started" in files["container"] and files["container"].count("topic-of-c/messages") == 3
    for name, text in files.items():
        others = {"a", "b", "c"} - {name} if name != "container" else {"a", "b"}
        for other in others:
            assert f"topic-of-{other}" not in text, f"{other}'s lines are in {name}'s file"
            assert f"broker {other} started" not in text, f"{other}'s lines are in {name}'s file"
        for line in text.splitlines():  # every line of a broker's file is of that broker
            if name != "container" and line.strip():
                assert f"_{name}_0]" in line, line
