// mongosh against mongod-sim: rs.initiate(), rs.status(), rs.add(), rs.reconfig(),
// rs.stepDown(), countDocuments(). Run by tests/fidelity.rs as
//   mongosh "mongodb://HOST1/?directConnection=true" --quiet --file mongosh_fidelity.js
// with MMO_HOSTS=h1,h2,h3 in the environment. Prints "MONGOSH FIDELITY OK".
const hosts = process.env.MMO_HOSTS.split(',');

function waitFor(what, cond) {
  const start = Date.now();
  for (;;) {
    let ok = false;
    try { ok = cond(); } catch (e) { ok = false; }
    if (ok) return;
    if (Date.now() - start > 30000) throw new Error('timed out waiting for ' + what);
    sleep(50);
  }
}

function expectCode(code, fn) {
  try {
    fn();
  } catch (e) {
    if (e.code !== code) throw new Error('expected code ' + code + ', got ' + e.code + ': ' + e.message);
    return;
  }
  throw new Error('expected error code ' + code);
}

function memberState(name) {
  const m = rs.status().members.find((x) => x.name === name);
  return m ? m.stateStr : undefined;
}

function committed() {
  return db.adminCommand({ replSetGetConfig: 1, commitmentStatus: true }).commitmentStatus === true;
}

expectCode(94, () => rs.status());
const init = rs.initiate();
if (init.ok !== 1) throw new Error('rs.initiate failed: ' + JSON.stringify(init));
expectCode(23, () => rs.initiate());
waitFor('primary', () => db.hello().isWritablePrimary === true);

let st = rs.status();
if (st.set !== 'rs0' || st.myState !== 1 || st.members.length !== 1 || st.members[0].self !== true) {
  throw new Error('unexpected rs.status(): ' + JSON.stringify(st));
}

// Shorten the timeouts the real way, through the config.
let cfg = rs.conf();
cfg.settings.electionTimeoutMillis = 1000;
cfg.settings.heartbeatIntervalMillis = 200;
waitFor('config committed', committed);
let r = rs.reconfig(cfg);
if (r.ok !== 1) throw new Error('rs.reconfig failed: ' + JSON.stringify(r));

for (const h of hosts.slice(1)) {
  waitFor('config committed', committed);
  r = rs.add(h);
  if (r.ok !== 1) throw new Error('rs.add failed: ' + JSON.stringify(r));
  waitFor(h + ' SECONDARY', () => memberState(h) === 'SECONDARY');
}
// newlyAdded shows only in hello: priority 0 (passives) until it is cleared.
waitFor('newlyAdded cleared', () => {
  const hello = db.adminCommand({ hello: 1 });
  return hosts.every((h) => hello.hosts.includes(h));
});
if (rs.conf().members.length !== 3) throw new Error('expected 3 members: ' + JSON.stringify(rs.conf()));

// A reconfig changing priorities.
waitFor('config committed', committed);
cfg = rs.conf();
cfg.members[2].priority = 0.5;
r = rs.reconfig(cfg);
if (r.ok !== 1) throw new Error('rs.reconfig failed: ' + JSON.stringify(r));
if (rs.conf().members[2].priority !== 0.5) throw new Error('priority not applied');

// countDocuments runs an aggregate; an unknown stage is 40324.
const items = db.getSiblingDB('app').items;
items.insertMany([{ _id: 1, k: 'a' }, { _id: 2, k: 'b' }, { _id: 3, k: 'a' }]);
if (items.countDocuments({}) !== 3 || items.countDocuments({ k: 'a' }) !== 2) {
  throw new Error('countDocuments: ' + items.countDocuments({}) + ', ' + items.countDocuments({ k: 'a' }));
}
expectCode(40324, () => items.aggregate([{ $frobnicate: {} }]).toArray());

// updateOne / replaceOne with upsert (mongosh names the upserted _id insertedId) /
// deleteOne, and the FCV of a 7.0 binary.
const leases = db.getSiblingDB('app').leases;
let u = leases.replaceOne({ _id: 'lease' }, { holder: 'a' }, { upsert: true });
if (u.insertedId !== 'lease' || u.upsertedCount !== 1 || u.matchedCount !== 0) throw new Error('replaceOne: ' + JSON.stringify(u));
u = leases.updateOne({ _id: 'lease', holder: 'a' }, { $set: { term: 2 } }, { writeConcern: { w: 'majority' } });
if (u.matchedCount !== 1 || u.modifiedCount !== 1) throw new Error('updateOne: ' + JSON.stringify(u));
expectCode(9, () => leases.updateOne({ _id: 'lease' }, { $inc: { term: 1 } }));
if (leases.deleteOne({ _id: 'lease' }).deletedCount !== 1) throw new Error('deleteOne');
const fcv = db.adminCommand({ getParameter: 1, featureCompatibilityVersion: 1 }).featureCompatibilityVersion;
if (fcv.version !== '7.0') throw new Error('FCV: ' + JSON.stringify(fcv));
expectCode(7369100, () => db.adminCommand({ setFeatureCompatibilityVersion: '6.0' }));

// Step down: another member becomes primary, this connection stays usable.
r = rs.stepDown(10, 5);
if (r.ok !== 1) throw new Error('rs.stepDown failed: ' + JSON.stringify(r));
waitFor('a new primary', () => {
  const s = rs.status();
  return s.myState === 2 && s.members.some((m) => m.stateStr === 'PRIMARY' && !m.self);
});
expectCode(10107, () => rs.stepDown());
print('MONGOSH FIDELITY OK');
