"""pymongo against mongod-sim members on small volumes: the oplog's size in
bytes as collStats reports it (`maxSize`: 5 % of the free disk, at least
990 MB; `--oplogSize` when given), the volume's use in dbStats (`fsUsedSize`,
`fsTotalSize`), and a write that does not fit: the primary dies without an
answer (mongod aborts), another member takes over, and the dead one starts
again on its full volume.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS        comma-separated member addresses (3), started with
                   --disk-size 460Mi
  MMO_CONTROL      that simulator's control address (host:port)
  MMO_OPLOG_HOST   one member started with --oplog-size-bytes 1048576
                   --disk-size 1Gi
Prints "PYMONGO OPLOG AND DISK OK" at the end; any failure raises.
"""
import os
import urllib.error
import urllib.request

import pymongo
from pymongo.errors import ConnectionFailure

from fidelity_common import direct, wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
CONTROL = os.environ["MMO_CONTROL"]
OPLOG_HOST = os.environ["MMO_OPLOG_HOST"]
MIB = 1024 * 1024
PRIMARY = 1


def control(*words):
    try:
        with urllib.request.urlopen(f"http://{CONTROL}/" + "/".join(words), timeout=10) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        return e.read().decode()


def state(host):
    return direct(host).admin.command("replSetGetStatus")["myState"]


def oplog_stats(host):
    return direct(host).local.command("collStats", "oplog.rs")


# A volume of 460 MiB: the journal (2 x 100 MB) and the diagnostic data
# directory (250 MB) leave 10 MiB, whose 5 % is below the 990 MB floor.
direct(HOSTS[0]).admin.command("replSetInitiate", {
    "_id": "rs0",
    "members": [{"_id": i, "host": h} for i, h in enumerate(HOSTS)],
    "settings": {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200},
})
wait("a primary and two secondaries", lambda: sorted(state(h) for h in HOSTS) == [1, 2, 2])
for host in HOSTS:
    stats = oplog_stats(host)
    assert stats["capped"] is True, stats
    assert stats["maxSize"] == 990 * MIB, stats
    assert stats["count"] >= 1 and stats["size"] > 0, stats
    db = direct(host).admin.command("dbStats")
    assert db["fsTotalSize"] == 460 * MIB, db
    assert 450 * MIB <= db["fsUsedSize"] < db["fsTotalSize"], db

# --oplogSize wins over the disk.
direct(OPLOG_HOST).admin.command("replSetInitiate", {"_id": "rs0", "members": [{"_id": 0, "host": OPLOG_HOST}]})
wait("the single member primary", lambda: state(OPLOG_HOST) == PRIMARY)
assert oplog_stats(OPLOG_HOST)["maxSize"] == MIB, oplog_stats(OPLOG_HOST)

# Fill the primary's volume: the write that does not fit gets no answer.
primary = next(h for h in HOSTS if state(h) == PRIMARY)
client = pymongo.MongoClient(f"mongodb://{primary}/", directConnection=True, retryWrites=False,
                             serverSelectionTimeoutMS=5000)
coll = client.test.docs
used_before = client.admin.command("dbStats")["fsUsedSize"]
died = False
for i in range(400):
    try:
        coll.insert_one({"_id": i, "pad": "x" * 100_000})
    except ConnectionFailure:
        died = True
        break
assert died, "the primary accepted 40 MB on a volume with 10 MiB left"
assert i > 10, f"the primary died after only {i} writes"
print(f"the primary died on write {i}; {used_before} bytes in use before")

# Another member takes over; the dead one starts again (its startup_log
# document still fits) and rejoins with its volume as full as it left it.
others = [h for h in HOSTS if h != primary]
wait("a secondary taking over", lambda: PRIMARY in [state(h) for h in others])
assert "unknown" not in control("start", primary)
wait("the restarted member a secondary", lambda: state(primary) == 2)
db = direct(primary).admin.command("dbStats")
assert db["fsTotalSize"] - db["fsUsedSize"] < 2 * 100_000 + 1024, db
print("PYMONGO OPLOG AND DISK OK")
