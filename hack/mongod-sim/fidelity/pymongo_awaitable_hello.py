"""pymongo against mongod-sim: every member of an idle set holds an awaitable hello.

mongod answers `{hello, topologyVersion, maxAwaitTimeMS}` only when its topology
changes or `maxAwaitTimeMS` runs out; a member that answers at once makes every
driver's streaming monitor loop on it. This script initiates a 2+2+1 set (two data
members per "cluster" and an arbiter), lets it settle, then sends the awaitable
hello to every member with the topologyVersion that member just reported and
measures how long the reply was held.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS  comma-separated member addresses (5), no access control
Prints "AWAITABLE HELLO FIDELITY OK" at the end; any failure raises.
"""
import os
import time

import pymongo
from bson.int64 import Int64
from bson.objectid import ObjectId

from fidelity_common import wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
MAX_AWAIT_MS = 1000
# A hold shorter than this is "answered at once" (the sim's own slack is ~10 ms).
MIN_HOLD = 0.9 * MAX_AWAIT_MS / 1000.0


def direct(host):
    # Polling monitor: this client's own monitor must not keep the member's waiters busy.
    return pymongo.MongoClient(f"mongodb://{host}/", directConnection=True,
                               serverSelectionTimeoutMS=10000, serverMonitoringMode="poll")


clients = {h: direct(h) for h in HOSTS}
settings = {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}
members = [{"_id": i, "host": h} for i, h in enumerate(HOSTS)]
members[-1]["arbiterOnly"] = True
clients[HOSTS[0]].admin.command(
    "replSetInitiate", {"_id": "rs0", "version": 1, "members": members, "settings": settings})

states = {"PRIMARY", "SECONDARY", "ARBITER"}


def settled():
    status = clients[HOSTS[0]].admin.command("replSetGetStatus")["members"]
    return (all(m["stateStr"] in states for m in status)
            and sum(m["stateStr"] == "PRIMARY" for m in status) == 1
            and all(clients[h].admin.command("hello").get("setVersion") == 1 for h in HOSTS))


wait("a primary and every member settled", settled)
time.sleep(1.0)  # a few heartbeats with nothing changing

failures = []
for h in HOSTS:
    c = clients[h]
    for attempt in range(3):
        tv = c.admin.command("hello")["topologyVersion"]
        assert isinstance(tv["processId"], ObjectId), tv
        assert isinstance(tv["counter"], Int64), f"counter is {type(tv['counter']).__name__}: {tv}"
        start = time.monotonic()
        reply = c.admin.command({"hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": MAX_AWAIT_MS})
        held = time.monotonic() - start
        if reply["topologyVersion"] != tv:
            # A real topology change while we waited: an early answer is correct; measure again.
            continue
        print(f"{h}: held {held * 1000:.0f} ms (counter {tv['counter']})")
        if held < MIN_HOLD:
            failures.append(f"{h} answered after {held * 1000:.0f} ms with the same topologyVersion {tv}")
        break
    else:
        failures.append(f"{h}: topologyVersion kept changing on an idle set")

# Another process's id or an older counter: answered at once, as mongod does.
h = HOSTS[0]
tv = clients[h].admin.command("hello")["topologyVersion"]
for other in ({"processId": ObjectId(), "counter": tv["counter"]},
              {"processId": tv["processId"], "counter": Int64(tv["counter"] - 1)}):
    start = time.monotonic()
    clients[h].admin.command({"hello": 1, "topologyVersion": other, "maxAwaitTimeMS": 5000})
    held = time.monotonic() - start
    if held > 1.0:
        failures.append(f"{h} held a hello with a different topologyVersion {other} for {held:.1f} s")

assert not failures, "\n".join(failures)
print("AWAITABLE HELLO FIDELITY OK")
