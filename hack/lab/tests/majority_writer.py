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

With WRITER_RETRY_WRITES set the driver retries a write once on a retryable
error (retryWrites=True, pymongo's default, as an application runs it);
without it, as the end-to-end scenarios run it, retryWrites=False: every
failure is an "ERR" line and the next number.

With WRITER_EVENTS set it also prints the driver's own view, one line each,
"EVENT <time.monotonic()> <what> ...": server and topology changes (SDAM;
pymongo publishes them from a queue it drains once a second, so their times
are late), each heartbeat (published as it goes), pool clears and closed
connections, and each insert's
start, success or failure with the server it went to, so that a gap between
acknowledgements can be laid beside what the driver saw.
"""
import os
import sys
import time

from pymongo import MongoClient, WriteConcern, monitoring
from pymongo.errors import PyMongoError
from pymongo.read_concern import ReadConcern


def event(*words):
    print("EVENT", f"{time.monotonic():.6f}", *words, flush=True)


def address(pair):
    return f"{pair[0]}:{pair[1]}" if pair else "-"


class Servers(monitoring.ServerListener):
    def opened(self, e):
        event("server-opened", address(e.server_address))

    def description_changed(self, e):
        old, new = e.previous_description.server_type_name, e.new_description.server_type_name
        if old != new:
            event("server-changed", address(e.server_address), old, new)

    def closed(self, e):
        event("server-closed", address(e.server_address))


class Topology(monitoring.TopologyListener):
    def opened(self, e):
        pass

    def description_changed(self, e):
        primaries = [address(s.address) for s in e.new_description.server_descriptions().values()
                     if s.server_type_name == "RSPrimary"]
        event("topology-changed", "primary=" + (",".join(primaries) or "none"))

    def closed(self, e):
        pass


class Heartbeats(monitoring.ServerHeartbeatListener):
    def started(self, e):
        event("heartbeat-started", address(e.connection_id), f"awaited={e.awaited}")

    def succeeded(self, e):
        reply = e.reply.document
        primary = reply.get("isWritablePrimary", reply.get("ismaster"))
        event("heartbeat-succeeded", address(e.connection_id), f"writable={primary}", f"awaited={e.awaited}")

    def failed(self, e):
        event("heartbeat-failed", address(e.connection_id), type(e.reply).__name__, f"awaited={e.awaited}")


class Pools(monitoring.ConnectionPoolListener):
    def pool_created(self, e):
        pass

    def pool_ready(self, e):
        pass

    def pool_cleared(self, e):
        event("pool-cleared", address(e.address))

    def pool_closed(self, e):
        event("pool-closed", address(e.address))

    def connection_created(self, e):
        event("connection-created", address(e.address))

    def connection_ready(self, e):
        pass

    def connection_closed(self, e):
        event("connection-closed", address(e.address), e.reason)

    def connection_check_out_started(self, e):
        pass

    def connection_check_out_failed(self, e):
        event("check-out-failed", address(e.address), e.reason)

    def connection_checked_out(self, e):
        pass

    def connection_checked_in(self, e):
        pass


class Inserts(monitoring.CommandListener):
    def started(self, e):
        if e.command_name == "insert":
            event("insert-started", address(e.connection_id))

    def succeeded(self, e):
        if e.command_name == "insert":
            event("insert-succeeded", address(e.connection_id), f"{e.duration_micros}us")

    def failed(self, e):
        if e.command_name == "insert":
            failure = e.failure if isinstance(e.failure, dict) else {}
            what = failure.get("codeName") or failure.get("errtype") or type(e.failure).__name__
            event("insert-failed", address(e.connection_id), str(what), f"{e.duration_micros}us")


listeners = [Servers(), Topology(), Heartbeats(), Pools(), Inserts()] if os.environ.get("WRITER_EVENTS") else []
client = MongoClient(os.environ["MONGO_URI"], serverSelectionTimeoutMS=20000,
                     retryWrites=bool(os.environ.get("WRITER_RETRY_WRITES")), event_listeners=listeners)
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
        if listeners:
            event("write-error", type(error).__name__, str(error).replace("\n", " ")[:200])
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
