"""pymongo against a mongod-sim primary whose secondaries are all priority 0:
replSetStepDown waits `secondaryCatchUpPeriodSecs` and fails with 262
ExceededTimeLimit ("No electable secondaries caught up"); while it waits, hello
says isWritablePrimary false and a writer's inserts are refused with 10107
NotWritablePrimary; afterwards the member is primary and writable again.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS     comma-separated member addresses (3)
Prints "PYMONGO STEP DOWN OK" at the end; any failure raises.
"""
import os
import threading
import time

import pymongo
from pymongo.errors import OperationFailure

from fidelity_common import wait

HOSTS = os.environ["MMO_HOSTS"].split(",")


def direct(host):
    return pymongo.MongoClient(f"mongodb://{host}/", directConnection=True,
                               serverSelectionTimeoutMS=10000, retryWrites=False)


def code_of(e):
    return getattr(e, "code", None) or (getattr(e, "details", None) or {}).get("code")


h1 = HOSTS[0]
members = [{"_id": i, "host": h, "priority": 1 if i == 0 else 0} for i, h in enumerate(HOSTS)]
settings = {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}
direct(h1).admin.command("replSetInitiate", {"_id": "rs0", "members": members, "settings": settings})
wait("h1 primary", lambda: direct(h1).admin.command("hello").get("isWritablePrimary"))
wait("every member healthy", lambda: all(
    m["state"] in (1, 2) for m in direct(h1).admin.command("replSetGetStatus")["members"]))

writer = direct(h1)
# w:1: a write waiting for a majority when the attempt begins is killed (11602),
# and the driver then waits for its monitor instead of writing.
coll = writer.app.get_collection("items", write_concern=pymongo.WriteConcern(w=1))
coll.insert_one({"n": -1})
refused = []
written = []
stop = threading.Event()


def write_loop():
    n = 0
    while not stop.is_set():
        try:
            coll.insert_one({"n": n})
            written.append(time.monotonic())
        except pymongo.errors.PyMongoError as e:
            refused.append((time.monotonic(), code_of(e)))
        n += 1
        time.sleep(0.05)


thread = threading.Thread(target=write_loop)
thread.start()
time.sleep(0.5)
hello_during = []


def watch_hello():
    time.sleep(1.0)
    hello_during.append(direct(h1).admin.command("hello"))


watcher = threading.Thread(target=watch_hello)
watcher.start()
started = time.monotonic()
try:
    direct(h1).admin.command({"replSetStepDown": 30, "secondaryCatchUpPeriodSecs": 3})
    raise AssertionError("step-down without an electable secondary succeeded")
except OperationFailure as e:
    assert e.code == 262, e
    assert "No electable secondaries caught up" in str(e), e
ended = time.monotonic()
assert ended - started >= 2.9, f"gave up after {ended - started:.1f} s"
watcher.join()
assert hello_during and hello_during[0]["isWritablePrimary"] is False, hello_during
time.sleep(1.0)
stop.set()
thread.join()

during = [code for at, code in refused if started <= at <= ended]
assert 10107 in during and set(during) <= {10107, 11602}, refused
assert not [at for at in written if started + 0.2 < at < ended - 0.2], "a write was accepted during the wait"
assert any(at > ended for at in written), "writes did not resume after the failed step-down"
hello = direct(h1).admin.command("hello")
assert hello["isWritablePrimary"] is True, hello
print("PYMONGO STEP DOWN OK")
