"""pymongo against mongod-sim members of releases before 7.0 and before 4.4.2:
setFeatureCompatibilityVersion refuses `confirm` before 7.0 (its IDL is strict:
40415) and accepts the command without it; a 4.4.1 member answers `hello` with
59 while `isMaster` (what pymongo's handshake sends) works, without `helloOk`.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS     comma-separated member addresses (3), started with --server-version 6.0.19
  MMO_OLD_HOST  one member started with --server-version 4.4.1
Prints "PYMONGO OLD VERSIONS OK" at the end; any failure raises.
"""
import os

import pymongo
from pymongo.errors import OperationFailure

from fidelity_common import wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
OLD_HOST = os.environ["MMO_OLD_HOST"]


def direct(host):
    return pymongo.MongoClient(f"mongodb://{host}/", directConnection=True, serverSelectionTimeoutMS=10000)


def expect_failure(code, fn):
    try:
        fn()
    except OperationFailure as e:
        assert e.code == code, f"expected code {code}, got {e.code}: {e!r}"
        return e
    raise AssertionError(f"expected error code {code}, got success")


# --- 6.0: setFeatureCompatibilityVersion with and without `confirm` --------
first = direct(HOSTS[0])
assert first.admin.command("buildInfo")["version"] == "6.0.19"
members = [{"_id": i, "host": h} for i, h in enumerate(HOSTS)]
first.admin.command("replSetInitiate", {"_id": "rs0", "version": 1, "members": members})
wait("a primary", lambda: any(direct(h).admin.command("hello").get("isWritablePrimary") for h in HOSTS))
client = pymongo.MongoClient(
    "mongodb://" + ",".join(HOSTS) + "/?replicaSet=rs0", serverSelectionTimeoutMS=20000
)
e = expect_failure(
    40415,
    lambda: client.admin.command({"setFeatureCompatibilityVersion": "6.0", "confirm": True}),
)
assert e.details["errmsg"] == "BSON field 'setFeatureCompatibilityVersion.confirm' is an unknown field.", e.details
assert e.details["codeName"] == "Location40415", e.details
client.admin.command({"setFeatureCompatibilityVersion": "6.0"})
got = client.admin.command({"getParameter": 1, "featureCompatibilityVersion": 1})
assert got["featureCompatibilityVersion"] == {"version": "6.0"}, got

# --- 4.4.1: no `hello` yet --------------------------------------------------
old = direct(OLD_HOST)
# pymongo connected through its handshake (isMaster with helloOk): no helloOk back.
legacy = old.admin.command({"isMaster": 1, "helloOk": True})
assert legacy["ismaster"] is False and "helloOk" not in legacy, legacy
assert legacy["maxWireVersion"] == 9, legacy
e = expect_failure(59, lambda: old.admin.command("hello"))
assert e.details["errmsg"] == "no such command: 'hello'", e.details
assert old.admin.command("buildInfo")["version"] == "4.4.1"

print("PYMONGO OLD VERSIONS OK")
