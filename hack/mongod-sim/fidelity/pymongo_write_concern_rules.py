"""pymongo against mongod-sim members (7.0): mongod 5.0+'s reconfig rules about
write concern and PSA sets, and what a production client sees of newlyAdded.

- A PSA re-add in one reconfig is refused (103); rs.reconfigForPSASet's way
  (votes with priority 0, then the priority) is accepted.
- With no cluster-wide write concern, the primary's own newlyAdded removal that
  would change the implicit default fails silently: the member stays a passive
  in hello.
- A reconfig changing the implicit default is refused with 103, forced or not,
  and accepted after setDefaultRWConcern, which also lets the stuck member vote.
- replSetGetConfig's $_internalIncludeNewlyAdded is refused (72), as on a
  production mongod.

Run by tests/fidelity.rs. Environment:
  MMO_HOSTS  comma-separated member addresses (5)
Prints "PYMONGO WRITE CONCERN RULES OK" at the end; any failure raises.
"""
import os
import time

from fidelity_common import direct, expect_code, wait

HOSTS = os.environ["MMO_HOSTS"].split(",")
h1, h2, h3, h4, h5 = HOSTS
FLIP = "would change the implicit default write concern"
SETTINGS = {"electionTimeoutMillis": 1000, "heartbeatIntervalMillis": 200}


def config(p):
    c = p.admin.command("replSetGetConfig")["config"]
    c["version"] += 1
    return c


def reconfig(p, change, force=False):
    c = config(p)
    change(c)
    return p.admin.command({"replSetReconfig": c, "force": force})


def state(host):
    return direct(host).admin.command("hello")


def secondary(host):
    return state(host).get("secondary") is True


# {data, arbiter}: the implicit default is {w: 1}.
c1 = direct(h1)
c1.admin.command("replSetInitiate", {
    "_id": "rs0", "version": 1, "settings": SETTINGS,
    "members": [{"_id": 0, "host": h1}, {"_id": 2, "host": h3, "arbiterOnly": True}]})
wait("h1 primary", lambda: state(h1).get("isWritablePrimary"))
p = c1
d = p.admin.command("getDefaultRWConcern")
assert "defaultWriteConcern" not in d and d["defaultWriteConcernSource"] == "implicit", d
assert d["defaultReadConcern"] == {"level": "local"} and d["defaultReadConcernSource"] == "implicit", d

# PSA re-add in one step: 103. In two steps (rs.reconfigForPSASet): accepted.
e = expect_code(103, lambda: reconfig(p, lambda c: c["members"].append({"_id": 1, "host": h2})))
assert "PSA topology" in str(e), e
reconfig(p, lambda c: c["members"].append({"_id": 1, "host": h2, "priority": 0}))
wait("h2 SECONDARY", lambda: secondary(h2))
wait("config committed", lambda: p.admin.command("replSetGetConfig", commitmentStatus=True)["commitmentStatus"])


def raise_priority(c):
    for m in c["members"]:
        if m["host"] == h2:
            m["priority"] = 1


reconfig(p, raise_priority)
wait("h2 electable in hello", lambda: h2 in state(h1)["hosts"])

# A third data member keeps {w: 1} (3 of 4 voters is no more than a majority):
# its newlyAdded is cleared and it shows in hello's hosts.
wait("config committed", lambda: p.admin.command("replSetGetConfig", commitmentStatus=True)["commitmentStatus"])
reconfig(p, lambda c: c["members"].append({"_id": 3, "host": h4}))
wait("h4 votes (listed in hosts)", lambda: h4 in state(h1)["hosts"])

# A fourth would make it {w: "majority"}: its newlyAdded removal fails and it
# stays a passive (priority 0) although SECONDARY.
wait("config committed", lambda: p.admin.command("replSetGetConfig", commitmentStatus=True)["commitmentStatus"])
reconfig(p, lambda c: c["members"].append({"_id": 4, "host": h5}))
wait("h5 SECONDARY", lambda: secondary(h5))
time.sleep(2)
hello = state(h1)
assert h5 in hello.get("passives", []) and h5 not in hello["hosts"], hello
assert state(h5).get("passive") is True
member = next(m for m in p.admin.command("replSetGetConfig")["config"]["members"] if m["host"] == h5)
assert member["votes"] == 1 and member["priority"] == 1 and "newlyAdded" not in member, member
expect_code(72, lambda: p.admin.command({"replSetGetConfig": 1, "$_internalIncludeNewlyAdded": True}))

# Removing the arbiter would make it {w: "majority"}: 103, forced or not.
drop_arbiter = lambda c: c.update(members=[m for m in c["members"] if not m.get("arbiterOnly")])
e = expect_code(103, lambda: reconfig(p, drop_arbiter))
assert FLIP in str(e), e
e = expect_code(103, lambda: reconfig(p, drop_arbiter, force=True))
assert FLIP in str(e), e

# A cluster-wide write concern: the stuck member votes, the reconfig passes.
expect_code(10107, lambda: direct(h2).admin.command("setDefaultRWConcern", defaultWriteConcern={"w": 1}))
expect_code(2, lambda: p.admin.command("setDefaultRWConcern", defaultWriteConcern={"w": 0}))
r = p.admin.command("setDefaultRWConcern", defaultWriteConcern={"w": "majority"})
assert r["defaultWriteConcern"] == {"w": "majority", "wtimeout": 0} and r["defaultWriteConcernSource"] == "global", r
assert "updateOpTime" in r and "updateWallClockTime" in r, r
wait("h5 votes (listed in hosts)", lambda: h5 in state(h1)["hosts"])
wait("config committed", lambda: p.admin.command("replSetGetConfig", commitmentStatus=True)["commitmentStatus"])
reconfig(p, drop_arbiter)
wait("a secondary knows the default", lambda: direct(h2).admin.command("getDefaultRWConcern").get("defaultWriteConcernSource") == "global")
expect_code(20, lambda: p.admin.command("setDefaultRWConcern", defaultWriteConcern={}))

print("PYMONGO WRITE CONCERN RULES OK")
