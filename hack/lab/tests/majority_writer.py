"""Writes with w:"majority" through pymongo until told to stop, then reports.

Reads the connection string from MONGO_URI (never from arguments: it holds a
password). Prints one line per acknowledged insert ("ACK <n>"); once the file
named by STOP_FILE exists and at least ten writes are acknowledged (or a minute
after the file appeared, whichever comes first: a change over in a fraction of
a second leaves too few writes to judge, and the set must take majority writes
after it anyway) it stops, reads every document back with read concern majority
and prints "FOUND <n> <n> ...". Unacknowledged attempts are retried with the
next number, so only acknowledged numbers are promised. It writes into the
collection named by WRITES_COLLECTION ("writes" by default), so that two
writers can run on one set.
"""
import os
import sys
import time

from pymongo import MongoClient, WriteConcern
from pymongo.errors import PyMongoError
from pymongo.read_concern import ReadConcern

client = MongoClient(os.environ["MONGO_URI"], serverSelectionTimeoutMS=20000, retryWrites=False)
COLLECTION = os.environ.get("WRITES_COLLECTION", "writes")
collection = client.lab.get_collection(COLLECTION, write_concern=WriteConcern(w="majority", wtimeout=10000))
stop_file = os.environ["STOP_FILE"]
MIN_ACKNOWLEDGED = 10
STOP_GRACE_SECONDS = 60
n = 0
acknowledged = 0
stop_requested = None
while True:
    if stop_requested is None and os.path.exists(stop_file):
        stop_requested = time.time()
    if stop_requested is not None and (
        acknowledged >= MIN_ACKNOWLEDGED or time.time() > stop_requested + STOP_GRACE_SECONDS
    ):
        break
    n += 1
    try:
        collection.insert_one({"_id": n})
        acknowledged += 1
        print(f"ACK {n}", flush=True)
    except PyMongoError as error:
        print(f"ERR {n} {type(error).__name__}", flush=True)
        time.sleep(0.2)
    time.sleep(0.05)

deadline = time.time() + 60
while True:
    try:
        found = [d["_id"] for d in client.lab.get_collection(COLLECTION, read_concern=ReadConcern("majority")).find({})]
        break
    except PyMongoError as error:
        if time.time() > deadline:
            print(f"READ-FAILED {type(error).__name__}", flush=True)
            sys.exit(1)
        time.sleep(0.5)
print("FOUND " + " ".join(str(i) for i in sorted(found)), flush=True)
