"""pymongo against mongod-sim members with a tiny capped oplog (--oplog-size-bytes)
and a slow initial sync: a member stopped while the oplog window moved on
comes back RECOVERING, too stale to catch up (replSetGetStatus `tooStale`,
its own entry's `maintenanceMode`), and stays so until its data is wiped;
started empty it is STARTUP2 during its initial sync and then SECONDARY with
every document.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS     comma-separated member addresses (3), started with
                --oplog-size-bytes 500 (about five entries) --initial-sync-ms 3000
  MMO_CONTROL   the simulator's control address (host:port)
Prints "PYMONGO TOO STALE OK" at the end; any failure raises.
"""
import os
import time
import urllib.request

import pymongo
from pymongo.write_concern import WriteConcern

from fidelity_common import wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
CONTROL = os.environ["MMO_CONTROL"]
RECOVERING, SECONDARY, STARTUP2 = 3, 2, 5


def control(*words):
    with urllib.request.urlopen(f"http://{CONTROL}/" + "/".join(words), timeout=10) as r:
        return r.read().decode()


def direct(host):
    return pymongo.MongoClient(f"mongodb://{host}/", directConnection=True, serverSelectionTimeoutMS=10000)


def status(host):
    return direct(host).admin.command("replSetGetStatus")


direct(HOSTS[0]).admin.command("replSetInitiate", {
    "_id": "rs0",
    "members": [{"_id": i, "host": h} for i, h in enumerate(HOSTS)],
    "settings": {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200},
})
wait("every member up", lambda: all(status(h)["myState"] in (1, 2) for h in HOSTS))
client = pymongo.MongoClient(f"mongodb://{','.join(HOSTS)}/?replicaSet=rs0", serverSelectionTimeoutMS=20000)
coll = client.test.get_collection("docs", write_concern=WriteConcern(w="majority"))
coll.insert_one({"_id": 0})

# The third member goes away; the window moves on past its last entry.
stale = next(h for h in HOSTS if status(h)["myState"] == SECONDARY)
control("stop", stale)
for i in range(1, 21):
    coll.insert_one({"_id": i})
control("start", stale)
wait("the stopped member too stale", lambda: status(stale)["myState"] == RECOVERING)
st = status(stale)
assert st.get("tooStale") is True, st
me = next(m for m in st["members"] if m.get("self"))
assert me["stateStr"] == "RECOVERING", me
assert me.get("maintenanceMode") == 1, me
hello = direct(stale).admin.command("hello")
assert not hello["isWritablePrimary"] and not hello["secondary"], hello
others = [h for h in HOSTS if h != stale]
wait("its peers see it RECOVERING", lambda: any(
    m["name"] == stale and m["stateStr"] == "RECOVERING" for m in status(others[0])["members"]))

# It stays so: writes go on and nothing brings it back.
for i in range(21, 26):
    coll.insert_one({"_id": i})
time.sleep(2)
assert status(stale)["myState"] == RECOVERING

# Its data wiped, it starts empty: STARTUP2 through the initial sync, then SECONDARY.
control("stop", stale)
control("wipe", stale)
control("start", stale)
wait("the wiped member in initial sync", lambda: status(stale)["myState"] == STARTUP2)
wait("the wiped member SECONDARY", lambda: status(stale)["myState"] == SECONDARY)
st = status(stale)
assert "tooStale" not in st, st
reader = pymongo.MongoClient(f"mongodb://{stale}/", directConnection=True, readPreference="secondaryPreferred")
count = len(list(reader.test.docs.find({})))
assert count == 26, count
print("PYMONGO TOO STALE OK")
