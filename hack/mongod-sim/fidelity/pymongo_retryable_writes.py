"""pymongo against mongod-sim: retryable writes as mongod runs them.

- The same insert, update and delete sent twice with one lsid and txnNumber:
  both answers alike, the write applied once (a retried delete still n 1).
- A txnNumber below the session's newest: 225 TransactionTooOld.
- multi: true / limit: 0 in a retryable write: a write error 72.
- 10107 on a secondary carries the RetryableWriteError label for a retryable
  write only.
- The session's config.transactions record on a secondary, and the same
  insert sent again after a step-down to the new primary: answered, not
  written again.
- pymongo with retryWrites=True: an insert waiting for w:"majority" when the
  primary steps down is answered writeConcernError 11602 with the
  RetryableWriteError label; the driver sends it again to the new primary,
  which recognises it: one document, no error.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS     comma-separated member addresses (3)
  MMO_CONTROL   the simulator's control address (host:port)
Prints "PYMONGO RETRYABLE WRITES OK" at the end; any failure raises.
"""
import os
import threading
import time
import urllib.request

import pymongo
from bson.int64 import Int64
from pymongo import monitoring
from pymongo.errors import OperationFailure

from fidelity_common import direct, expect_code, wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
CONTROL = os.environ["MMO_CONTROL"]


def control(*words):
    with urllib.request.urlopen(f"http://{CONTROL}/" + "/".join(words), timeout=10) as r:
        return r.read().decode()


class Inserts(monitoring.CommandListener):
    def __init__(self):
        self.sent, self.replies = [], []

    def started(self, e):
        if e.command_name == "insert":
            self.sent.append(dict(e.command))

    def succeeded(self, e):
        if e.command_name == "insert":
            self.replies.append(dict(e.reply))

    def failed(self, e):
        if e.command_name == "insert":
            self.replies.append(e.failure)


h1 = HOSTS[0]
settings = {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}
members = [{"_id": i, "host": h} for i, h in enumerate(HOSTS)]
direct(h1).admin.command("replSetInitiate", {"_id": "rs0", "members": members, "settings": settings})
wait("a primary", lambda: any(direct(h).admin.command("hello").get("isWritablePrimary") for h in HOSTS))
wait("every member healthy", lambda: all(
    m["state"] in (1, 2) for m in direct(h1).admin.command("replSetGetStatus")["members"]))

inserts = Inserts()
client = pymongo.MongoClient(",".join(HOSTS), replicaSet="rs0", retryWrites=True,
                             serverSelectionTimeoutMS=20000, event_listeners=[inserts])
db = client.app
session = client.start_session()
MAJORITY = {"w": "majority"}


def run(command, txn):
    command = dict(command)
    command["txnNumber"] = Int64(txn)
    command["writeConcern"] = MAJORITY
    return db.command(command, session=session)


def primary():
    wait("a primary", lambda: client.primary is not None)
    return "%s:%d" % client.primary


# The same insert twice: success both times, one document.
first = run({"insert": "items", "documents": [{"_id": 1}, {"_id": 2}]}, 1)
again = run({"insert": "items", "documents": [{"_id": 1}, {"_id": 2}]}, 1)
assert first["n"] == 2 and again["n"] == 2, (first, again)
assert "writeErrors" not in again, again
assert db.items.count_documents({}) == 2

# An update with an upsert and a delete, each sent twice.
update = {"update": "items", "updates": [
    {"q": {"_id": 1}, "u": {"$set": {"x": 1}}},
    {"q": {"_id": 3}, "u": {"$set": {"y": 1}}, "upsert": True}]}
first = run(update, 2)
again = run(update, 2)
for reply in (first, again):
    assert reply["n"] == 2 and reply["nModified"] == 1, reply
    assert reply["upserted"] == [{"index": 1, "_id": 3}], reply
assert db.items.find_one({"_id": 3}) == {"_id": 3, "y": 1}
delete = {"delete": "items", "deletes": [{"q": {"_id": 2}, "limit": 1}]}
assert run(delete, 3)["n"] == 1
assert run(delete, 3)["n"] == 1, "a retried delete answers what it did"
assert db.items.count_documents({}) == 2

# An older txnNumber on the session: 225.
e = expect_code(225, lambda: run({"insert": "items", "documents": [{"_id": 9}]}, 2))
assert "TransactionTooOld" in str(e.details), e.details
assert db.items.count_documents({"_id": 9}) == 0

# multi / limit 0 cannot be retryable writes: a write error 72 at their index.
reply = run({"update": "items", "updates": [
    {"q": {"_id": 1}, "u": {"$set": {"z": 1}}},
    {"q": {}, "u": {"$set": {"z": 2}}, "multi": True}]}, 4)
assert [(w["index"], w["code"]) for w in reply["writeErrors"]] == [(1, 72)], reply
reply = run({"delete": "items", "deletes": [{"q": {"_id": 1}, "limit": 0}]}, 5)
assert [(w["index"], w["code"]) for w in reply["writeErrors"]] == [(0, 72)], reply

# 10107 from a secondary: labelled for a retryable write only.
secondary = [h for h in HOSTS if h != primary()][0]
on_secondary = direct(secondary)
with on_secondary.start_session() as s:
    labelled = on_secondary.app.command(
        {"insert": "items", "documents": [{"_id": 7}], "txnNumber": Int64(1)},
        session=s, check=False)
plain = on_secondary.app.command({"insert": "items", "documents": [{"_id": 7}]}, check=False)
assert labelled["code"] == 10107 and labelled["errorLabels"] == ["RetryableWriteError"], labelled
assert "topologyVersion" in labelled, labelled
assert plain["code"] == 10107 and "errorLabels" not in plain, plain

# The record replicates with the entries; after a step-down the new primary
# recognises the retry.
run({"insert": "items", "documents": [{"_id": 10}]}, 10)
lsid = session.session_id["id"]
old = primary()
for host in HOSTS:
    wait(f"the session's record on {host}", lambda: any(
        r["_id"]["id"] == lsid and r["txnNum"] == 10
        for r in direct(host).config.transactions.find({})))
direct(old).admin.command({"replSetStepDown": 10, "secondaryCatchUpPeriodSecs": 5})
wait("a new primary", lambda: client.primary is not None and primary() != old)
reply = run({"insert": "items", "documents": [{"_id": 10}]}, 10)
assert reply["n"] == 1 and "writeErrors" not in reply, reply
assert db.items.count_documents({"_id": 10}) == 1
run({"insert": "items", "documents": [{"_id": 11}]}, 11)
expect_code(225, lambda: run({"insert": "items", "documents": [{"_id": 12}]}, 10))

# The driver's own retry: an insert waiting for a majority when the primary
# steps down is answered 11602 with the label, and sent again to the new one.
wait("every member healthy again", lambda: all(
    m["state"] in (1, 2) for m in direct(primary()).admin.command("replSetGetStatus")["members"]))
old = primary()
for host in HOSTS:
    if host != old:
        control("lag", host, "1500")
outcome = []


def insert():
    try:
        outcome.append(db.get_collection("items", write_concern=pymongo.WriteConcern(w="majority"))
                       .insert_one({"_id": 20}))
    except pymongo.errors.PyMongoError as err:
        outcome.append(err)


inserts.sent.clear()
inserts.replies.clear()
writer = threading.Thread(target=insert)
writer.start()
time.sleep(0.3)
direct(old).admin.command({"replSetStepDown": 10, "secondaryCatchUpPeriodSecs": 8})
for host in HOSTS:
    control("lag", host, "0")
writer.join(30)
assert outcome and isinstance(outcome[0], pymongo.results.InsertOneResult), outcome
first = inserts.replies[0]
assert first.get("writeConcernError", {}).get("code") == 11602, inserts.replies
assert first.get("errorLabels") == ["RetryableWriteError"], first
assert len(inserts.sent) >= 2, inserts.sent
assert len({c["txnNumber"] for c in inserts.sent}) == 1, inserts.sent
assert db.items.count_documents({"_id": 20}) == 1
print("PYMONGO RETRYABLE WRITES OK")
