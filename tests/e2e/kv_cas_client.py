"""Child process of the KV concurrency test: compare-and-set increments of one key over HTTP.

    python kv_cas_client.py URL NAMESPACE KEY ATTEMPTS

Each attempt reads the key and writes its value + 1 with `If-Match: "<version it read>"`; a 412 means another
client got there first. Prints one line per successful CAS (`version value`), as its answer arrives.
"""

from __future__ import annotations

import base64
import sys

from tidemq.httpx_auth import signed_client


def main() -> None:
    url, namespace, key, attempts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with signed_client(url, timeout=60) as http:
        for _ in range(attempts):
            read = http.get(f"/v1/kv/{namespace}/entry", params={"key": key})
            read.raise_for_status()
            value = int(base64.b64decode(read.json()["value"])) + 1
            body = {"value": base64.b64encode(b"%d" % value).decode()}
            headers = {"If-Match": f'"{read.json()["version"]}"'}
            written = http.put(f"/v1/kv/{namespace}/entry", params={"key": key}, json=body, headers=headers)
            if written.status_code == 412:
                continue
            written.raise_for_status()
            print(f"{written.json()['version']} {value}", flush=True)


if __name__ == "__main__":
    main()
