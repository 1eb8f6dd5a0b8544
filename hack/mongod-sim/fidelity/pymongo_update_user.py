"""pymongo against mongod-sim members with access control: updateUser changes a
password set-wide as mongod's `CmdUMCTyped<UpdateUserCommand>` does.

Once the write is acknowledged by a majority, every member takes the new
password and refuses the old one (18); a connection authenticated before keeps
its session (mongod re-acquires the invalidated user, `_refreshUserInfoAsNeeded`,
and does not authenticate again); an updateUser with nothing to update is 2, of
an unknown user 11.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS     comma-separated member addresses (3), started with a root user
                `root` / `fidelity-pw` and a keyfile
  MMO_CONTROL   the simulator's control address (unused)
Prints "PYMONGO UPDATE USER OK" at the end; any failure raises.
"""
import os

import pymongo

from fidelity_common import expect_code, wait

HOSTS = os.environ["MMO_HOSTS"].split(",")


def as_user(host, user, password):
    return pymongo.MongoClient(f"mongodb://{host}/", directConnection=True, username=user,
                               password=password, authSource="admin", maxPoolSize=1,
                               serverSelectionTimeoutMS=5000)


def primary():
    for h in HOSTS:
        try:
            if as_user(h, "root", "fidelity-pw").admin.command("hello").get("isWritablePrimary"):
                return h
        except pymongo.errors.ConnectionFailure:
            pass
    return None


root = as_user(HOSTS[0], "root", "fidelity-pw")
root.admin.command("replSetInitiate", {
    "_id": "rs0", "members": [{"_id": i, "host": h} for i, h in enumerate(HOSTS)],
    "settings": {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}})
wait("a primary", lambda: primary() is not None)
p = as_user(primary(), "root", "fidelity-pw")
p.admin.command("createUser", "app", pwd="app-pw", roles=["readWrite"], writeConcern={"w": 3})

before = as_user(primary(), "app", "app-pw")
before.admin.command("ping")
p.admin.command("updateUser", "app", pwd="app-pw-2", writeConcern={"w": "majority"})
assert before.admin.command("ping")["ok"] == 1, "the session authenticated before stays"
wait("the new password on every member", lambda: all(
    as_user(h, "app", "app-pw-2").admin.command("ping")["ok"] == 1 for h in HOSTS))
for h in HOSTS:
    expect_code(18, lambda: as_user(h, "app", "app-pw").admin.command("ping"))
expect_code(2, lambda: p.admin.command("updateUser", "app"))
expect_code(11, lambda: p.admin.command("updateUser", "nobody", pwd="x"))
print("PYMONGO UPDATE USER OK")
