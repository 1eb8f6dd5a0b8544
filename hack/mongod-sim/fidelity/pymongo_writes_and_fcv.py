"""pymongo against mongod-sim members running 8.0.3: buildInfo / hello versions,
getParameter and setFeatureCompatibilityVersion with mongod's codes, update and
delete (update_one, replace_one with upsert, update_many, delete_one,
delete_many) with w:majority, and a member that refuses to start on data whose
FCV its binary cannot run (through the control interface's `version` command).

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS     comma-separated member addresses (3), started with --server-version 8.0.3
  MMO_CONTROL   the simulator's control address (host:port)
Prints "PYMONGO WRITES AND FCV OK" at the end; any failure raises.
"""
import os
import urllib.error
import urllib.request

import pymongo
from bson import ObjectId
from pymongo.errors import OperationFailure, WriteError
from pymongo.write_concern import WriteConcern

from fidelity_common import direct, expect_code, wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
CONTROL = os.environ["MMO_CONTROL"]


def control(*words):
    """Runs a control command; returns (ok, answer)."""
    try:
        with urllib.request.urlopen(f"http://{CONTROL}/" + "/".join(words), timeout=10) as r:
            return True, r.read().decode()
    except urllib.error.HTTPError as e:
        return False, e.read().decode()


def primary():
    for h in HOSTS:
        try:
            if direct(h).admin.command("hello").get("isWritablePrimary"):
                return h
        except pymongo.errors.ConnectionFailure:
            pass
    return None


def fcv(host):
    return direct(host).admin.command("getParameter", 1, featureCompatibilityVersion=1)["featureCompatibilityVersion"]


h1, h2, h3 = HOSTS
c1 = direct(h1)

# What an 8.0.3 member reports.
info = c1.admin.command("buildInfo")
assert info["version"] == "8.0.3" and info["versionArray"] == [8, 0, 3, 0], info
assert c1.admin.command("hello")["maxWireVersion"] == 25
assert c1.admin.command("serverStatus")["version"] == "8.0.3"
# Not initiated: the FCV is not known yet.
expect_code(258, lambda: c1.admin.command("getParameter", 1, featureCompatibilityVersion=1))

settings = {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}
c1.admin.command("replSetInitiate", {"_id": "rs0", "members": [{"_id": i, "host": h} for i, h in enumerate(HOSTS)],
                                     "settings": settings})
wait("a primary", lambda: primary() is not None)
wait("every member SECONDARY or PRIMARY", lambda: all(
    direct(h).admin.command("hello").get("secondary") or direct(h).admin.command("hello").get("isWritablePrimary")
    for h in HOSTS))
p = direct(primary())
assert fcv(primary()) == {"version": "8.0"}

# setFeatureCompatibilityVersion: confirm required (7369100), unknown values
# (4926900), transitions mongod does not permit (5147403), secondaries (10107).
e = expect_code(7369100, lambda: p.admin.command("setFeatureCompatibilityVersion", "7.0"))
assert "re-run this command with 'confirm: true'" in str(e), e
p.admin.command("setFeatureCompatibilityVersion", "7.0", confirm=True)
wait("FCV 7.0 everywhere", lambda: all(fcv(h) == {"version": "7.0"} for h in HOSTS))
expect_code(4926900, lambda: p.admin.command("setFeatureCompatibilityVersion", "6.0", confirm=True))
expect_code(5147403, lambda: p.admin.command("setFeatureCompatibilityVersion", "7.3", confirm=True))
secondary = next(h for h in HOSTS if h != primary())
expect_code(10107, lambda: direct(secondary).admin.command("setFeatureCompatibilityVersion", "8.0", confirm=True))
p.admin.command("setFeatureCompatibilityVersion", "8.0", confirm=True)
wait("FCV 8.0 everywhere", lambda: all(fcv(h) == {"version": "8.0"} for h in HOSTS))

# update / delete through a replica-set client with w:majority.
rs = pymongo.MongoClient(f"mongodb://{','.join(HOSTS)}/?replicaSet=rs0", serverSelectionTimeoutMS=20000)
coll = rs.app.get_collection("leases", write_concern=WriteConcern(w="majority", wtimeout=5000))
r = coll.replace_one({"_id": "lease"}, {"holder": "a", "term": 1}, upsert=True)
assert r.upserted_id == "lease" and r.matched_count == 0, r.raw_result
r = coll.update_one({"_id": "lease", "holder": "a"}, {"$set": {"term": 2}})
assert (r.matched_count, r.modified_count) == (1, 1), r.raw_result
r = coll.update_one({"_id": "lease", "holder": "b"}, {"$set": {"holder": "b"}})
assert (r.matched_count, r.modified_count, r.upserted_id) == (0, 0, None), r.raw_result
r = coll.update_one({"_id": "lease"}, {"$set": {"term": 2}})
assert (r.matched_count, r.modified_count) == (1, 0), r.raw_result
r = coll.update_one({"kind": "marker"}, {"$set": {"v": 1}, "$setOnInsert": {"created": True}}, upsert=True)
assert isinstance(r.upserted_id, ObjectId), r.raw_result
assert r.raw_result["upserted"] == r.upserted_id and r.raw_result["n"] == 1, r.raw_result
r = coll.update_many({}, {"$set": {"tag": "t"}})
assert (r.matched_count, r.modified_count) == (2, 2), r.raw_result
assert coll.find_one({"_id": "lease"}) == {"_id": "lease", "holder": "a", "term": 2, "tag": "t"}
e = expect_code(9, lambda: coll.update_one({"_id": "lease"}, {"$inc": {"term": 1}}))
assert isinstance(e, WriteError), e
expect_code(66, lambda: coll.update_one({"_id": "lease"}, {"$set": {"_id": "x"}}))
expect_code(11000, lambda: coll.update_one({"_id": "lease", "holder": "z"}, {"$set": {"x": 1}}, upsert=True))
expect_code(10107, lambda: direct(secondary).app.leases.update_one({"_id": "lease"}, {"$set": {"x": 1}}))
wait("updates on every member", lambda: all(
    list(pymongo.MongoClient(f"mongodb://{h}/", directConnection=True, readPreference="secondaryPreferred")
         .app.leases.find({"tag": "t"})).__len__() == 2 for h in HOSTS))
assert coll.delete_one({"_id": "lease"}).deleted_count == 1
assert coll.delete_many({"tag": "t"}).deleted_count == 1
assert coll.delete_one({"_id": "lease"}).deleted_count == 0
wait("deletes on every member", lambda: all(
    pymongo.MongoClient(f"mongodb://{h}/", directConnection=True, readPreference="secondaryPreferred")
    .app.leases.find_one({}) is None for h in HOSTS))

# A member restarted on a 7.0 image with FCV 8.0 data refuses to start (mongod
# exits with code 62); back on 8.0.3 it runs again.
victim = next(h for h in HOSTS if h != primary())
assert control("stop", victim) == (True, "stopped\n")
assert control("version", victim, "7.0.14")[0]
ok, answer = control("start", victim)
assert not ok and "exited with code 62" in answer and "UPGRADE PROBLEM" in answer, answer
assert "expected '6.0' or '6.3' or '7.0'" in answer, answer
assert control("version", victim, "8.0.3")[0]
assert control("start", victim) == (True, "started\n")
wait("restarted member SECONDARY", lambda: direct(victim).admin.command("hello").get("secondary") is True)
print("PYMONGO WRITES AND FCV OK")
