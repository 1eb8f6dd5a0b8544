"""Helpers shared by the pymongo fidelity scripts (imported from the script's own folder)."""
import time

import pymongo
from pymongo.errors import OperationFailure


def wait(what, cond, deadline=30.0):
    """Polls `cond` every 50 ms until it is true; server errors count as "not yet"."""
    start = time.monotonic()
    while True:
        try:
            if cond():
                return
        except (OperationFailure, pymongo.errors.ConnectionFailure):
            pass
        if time.monotonic() - start > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def direct(host):
    """A client of one member, whatever its state."""
    return pymongo.MongoClient(f"mongodb://{host}/", directConnection=True, serverSelectionTimeoutMS=10000)


def expect_code(code, fn):
    """Runs `fn`, which must fail with server error `code`; returns the error."""
    try:
        fn()
    except pymongo.errors.PyMongoError as e:
        # NotPrimaryError (10107) is an AutoReconnect; its code is in the reply.
        got = getattr(e, "code", None) or (getattr(e, "details", None) or {}).get("code")
        assert got == code, f"expected code {code}, got {got}: {e!r}"
        return e
    raise AssertionError(f"expected error code {code}, got success")
