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
