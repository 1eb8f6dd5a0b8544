"""pymongo against mongod-sim: a member finds itself in a config only through a
route that reaches it (mongod's isSelf slow path).

Member hosts here are aliases (think VIP:nodePort) routed to the member's listen
address through the control interface. The script checks, as a client sees it:
replSetInitiate answers 74 NodeNotFound while the alias has no route and while the
member's site does not hairpin; it succeeds once the route reaches the member; a
member restarted while its route is gone answers replSetGetStatus with 93 (it is
REMOVED) and becomes PRIMARY again on its own once the route is back.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS    the member's listen address (one)
  MMO_ALIAS    the alias its config names it by
  MMO_CONTROL  the control interface (HTTP)
Prints "IS SELF FIDELITY OK" at the end; any failure raises.
"""
import os
import urllib.request

import pymongo
from pymongo.errors import OperationFailure

from fidelity_common import wait

HOST = os.environ["MMO_HOSTS"].split(",")[0]
ALIAS = os.environ["MMO_ALIAS"]
CONTROL = os.environ["MMO_CONTROL"]


def control(*words):
    url = f"http://{CONTROL}/" + "/".join(words)
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10) as r:
        return r.read().decode()


def client():
    return pymongo.MongoClient(f"mongodb://{HOST}/", directConnection=True,
                               serverSelectionTimeoutMS=10000)


CONFIG = {"_id": "rs0", "version": 1, "members": [{"_id": 0, "host": ALIAS}],
          "settings": {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}}


def initiate_code():
    try:
        client().admin.command("replSetInitiate", CONFIG)
        return 0
    except OperationFailure as e:
        if e.code == 74:
            assert "maps to this node" in str(e), e
        return e.code


# No route behind the alias: no host of the config maps to this node.
assert initiate_code() == 74
# A route, but the member's site does not hairpin: still 74.
control("route", ALIAS, HOST)
control("site", HOST, "cluster-a")
control("hairpin", "cluster-a", "off")
assert initiate_code() == 74
# Hairpin: the member dials its alias, finds itself and is elected.
control("hairpin", "cluster-a", "on")
assert initiate_code() == 0
wait("the member to be PRIMARY",
     lambda: client().admin.command("replSetGetStatus")["myState"] == 1)

# Restarted before its route is back: REMOVED (replSetGetStatus answers 93).
control("stop", HOST)
control("unroute", ALIAS)
control("start", HOST)


def removed():
    try:
        client().admin.command("replSetGetStatus")
        return False
    except OperationFailure as e:
        return e.code == 93


wait("the restarted member to be REMOVED", removed)
hello = client().admin.command("hello")
assert not hello["isWritablePrimary"] and not hello.get("secondary"), hello
# The route comes back: a heartbeat re-checks isSelf and the member leads again.
control("route", ALIAS, HOST)
wait("the member to be PRIMARY again",
     lambda: client().admin.command("replSetGetStatus")["myState"] == 1)
print("IS SELF FIDELITY OK")
