#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Node.js @grpc/grpc-js (a second, independent gRPC stack) against a real ingestd on
// 127.0.0.1 with a kernel-picked port. The .proto files are loaded at run time with
// @grpc/proto-loader (no codegen): the SEED fixture (tests/interop/seed/rdma_stream.proto)
// for ControlStream, proto/h3000.proto + proto/health.proto for the rest. No call sends a
// session: every stream gets an implicit session, like a stock seed client.
//
//   health      grpc.health.v1.Health/Check is SERVING
//   seed        500 seed FrameMeta (GUID ids, no waferId, ms timestamps) on ControlStream:
//               one final Ack per frame, each naming a frame that was sent, clear NACKs;
//               ids outside the rule (empty, 257 bytes, a control character, not UTF-8)
//               get ok=false naming the rule and the stream stays usable
//   push        Negotiate's maxChunkSize; PushFrames of 20 x 4 MiB random frames (js-<n>)
//               plus one GUID id in chunks of that size: one DURABLE ack each, files byte-exact
//   negotiated  a session that asked for ackReceived gets RECEIVED then DURABLE, one that
//               did not gets the final ack only
//   seed-push   a frame without waferId and a ms timestamp: DURABLE, catalogued under a
//               default wafer with the timestamp as sent, file byte-exact
//   concurrent  8 PushFrames streams at once, all frames DURABLE and byte-exact
//   deadline    a PushFrames call whose deadline passes mid-frame, a PushFrames and a
//               ControlStream cancelled mid-stream: the node stays healthy (SERVING, every
//               pool slot back, a following stream stores a frame)
//   unknown     an unknown method and an unknown service answer UNIMPLEMENTED
//   stop        ingestd exits 0 on SIGTERM
//
// usage: node seed_interop.js --ingestd PATH --seed-proto FILE --proto-dir DIR --work DIR
// Prints "N passed, M failed" last; exits 1 on any failure. Every wait is bounded.
'use strict';

const path = require('path');
const fs = require('fs');
const crypto = require('crypto');
const { spawn, execFileSync } = require('child_process');

const WATCHDOG_MS = 240000;
const CALL_MS = 60000;
const FRAME = 4 << 20;

let passed = 0;
const failures = [];
function check(cond, what) {
  if (cond) passed++; else failures.push(what);
  console.log((cond ? 'ok: ' : 'FAIL: ') + what);
}
function summary() {
  console.log(`${passed} passed, ${failures.length} failed`);
  return failures.length ? 1 : 0;
}

function args() {
  const a = {};
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) a[v[i].replace(/^--/, '')] = v[i + 1];
  for (const k of ['ingestd', 'seed-proto', 'proto-dir', 'work']) {
    if (!a[k]) { console.error(`usage: seed_interop.js --${k} is required`); process.exit(2); }
  }
  return a;
}

let grpc, protoLoader;
try {
  grpc = require('@grpc/grpc-js');
  protoLoader = require('@grpc/proto-loader');
} catch (e) {
  console.log('FAIL: @grpc/grpc-js / @grpc/proto-loader not found in ' +
              path.join(__dirname, 'node_modules') + ' (deploy/install-deps.sh runs npm ci there): ' +
              e.message);
  console.log('0 passed, 1 failed');
  process.exit(1);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function within(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}
const deadline = (ms) => new Date(Date.now() + ms);
const unary = (client, method, req, ms = 10000) =>
  new Promise((res, rej) => client[method](req, { deadline: deadline(ms) }, (e, r) => (e ? rej(e) : res(r))));

// A bidi call: collects what arrives; `done` resolves with {acks, code, details}.
function bidi(client, method, ms = CALL_MS) {
  const call = client[method]({ deadline: deadline(ms) });
  const acks = [];
  call.on('data', (m) => acks.push(m));
  call.on('error', () => {});  // the status below carries it
  const done = new Promise((res) => call.on('status', (s) => res({ acks, code: s.code, details: s.details })));
  return { call, acks, done };
}
// write with backpressure, bounded: a call that ends early stops the writing
async function writeAll(b, msgs) {
  let ended = false;
  b.done.then(() => { ended = true; });
  for (const m of msgs) {
    if (ended) return false;
    if (!b.call.write(m)) {
      await within(Promise.race([new Promise((r) => b.call.once('drain', r)), b.done]), CALL_MS, 'write drain');
    }
  }
  return !ended;
}
async function waitFor(pred, ms, step = 50) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v || Date.now() > end) return v;
    await sleep(step);
  }
}

function chunksOf(frameId, data, chunk, meta) {
  const out = [];
  for (let off = 0; off < data.length; off += chunk) {
    const piece = data.subarray(off, Math.min(off + chunk, data.length));
    const c = { frameId, offset: off, last: off + piece.length >= data.length, data: piece };
    if (off === 0) c.meta = Object.assign({ frameId, length: data.length }, meta);
    out.push(c);
  }
  return out;
}
const byFrame = (acks) => {
  const m = new Map();
  for (const a of acks) { if (!m.has(a.frameId)) m.set(a.frameId, []); m.get(a.frameId).push(a); }
  return m;
};
// exactly one ack, ok and DURABLE, for each frame id of `ids`; nothing else
function oneDurableEach(acks, ids) {
  const m = byFrame(acks);
  const bad = ids.filter((f) => {
    const a = m.get(f) || [];
    return a.length !== 1 || !a[0].ok || a[0].stage !== 'ACK_STAGE_DURABLE';
  });
  const extra = [...m.keys()].filter((f) => !ids.includes(f));
  return { ok: bad.length === 0 && extra.length === 0, bad, extra, m };
}
const sameFile = (p, data) => { try { return fs.readFileSync(p).equals(data); } catch (e) { return false; } };

class Node {
  constructor(a) {
    this.a = a;
    this.data = path.join(a.work, 'data');
    this.portFile = path.join(a.work, 'ingestd.port');
    this.logPath = path.join(a.work, 'ingestd.log');
    const log = fs.openSync(this.logPath, 'w');
    this.exit = null;
    this.proc = spawn(a.ingestd, ['--listen', '127.0.0.1:0', '--port-file', this.portFile,
      '--data-dir', this.data, '--pool', '1M:16,4M:24', '--workers', '1',
      '--frame-timeout', '10'], { stdio: ['ignore', log, log] });
    this.exited = new Promise((r) => this.proc.on('exit', (code, sig) => { this.exit = { code, sig }; r(this.exit); }));
    fs.closeSync(log);
  }
  async ready() {
    const port = await waitFor(() => {
      if (this.exit) return 'exited';
      try { return fs.readFileSync(this.portFile, 'utf8').trim(); } catch (e) { return ''; }
    }, 15000);
    if (!port || port === 'exited') throw new Error('ingestd did not start:\n' + this.tail());
    return `127.0.0.1:${port}`;
  }
  framePath(wafer, id) { return path.join(this.data, 'frames', wafer, `${id}.frame`); }
  tail() { try { return fs.readFileSync(this.logPath, 'utf8').slice(-3000); } catch (e) { return ''; } }
  async stop() {
    if (!this.exit) this.proc.kill('SIGTERM');
    try { return await within(this.exited, 15000, 'ingestd stop'); } catch (e) {
      this.proc.kill('SIGKILL');
      await within(this.exited, 5000, 'ingestd kill').catch(() => {});
      return { code: null, sig: 'SIGKILL' };
    }
  }
}

async function main() {
  const a = args();
  fs.rmSync(a.work, { recursive: true, force: true });
  fs.mkdirSync(a.work, { recursive: true });
  const lo = { keepCase: true, longs: String, enums: String, defaults: true };
  const seed = grpc.loadPackageDefinition(protoLoader.loadSync(a['seed-proto'], lo)).h3000;
  const proj = grpc.loadPackageDefinition(protoLoader.loadSync(['h3000.proto', 'health.proto'],
    Object.assign({ includeDirs: [a['proto-dir']] }, lo)));

  const node = new Node(a);
  const killOnExit = () => { if (!node.exit) node.proc.kill('SIGKILL'); };
  process.on('exit', killOnExit);
  const watchdog = setTimeout(() => {
    console.log(`FAIL: watchdog: the test did not finish in ${WATCHDOG_MS / 1000} s`);
    killOnExit();
    process.exit(1);
  }, WATCHDOG_MS);

  const opts = { 'grpc.max_send_message_length': -1, 'grpc.max_receive_message_length': -1 };
  let clients = [];
  try {
    const addr = await node.ready();
    const cred = grpc.credentials.createInsecure();
    const seedc = new seed.RDMASvc(addr, cred, opts);
    const svc = new proj.h3000.RDMASvc(addr, cred, opts);
    const health = new proj.grpc.health.v1.Health(addr, cred, opts);
    clients = [seedc, svc, health];
    const serving = async () => {
      try { return (await unary(health, 'Check', { service: '' }, 5000)).status === 'SERVING'; } catch (e) { return false; }
    };
    const slotsBack = async () => {
      const ok = await waitFor(async () => {
        try {
          const s = await unary(svc, 'Stats', {}, 5000);
          return s.poolSlotsFree === s.poolSlotsTotal && s.framesInFlight === '0';
        } catch (e) { return false; }
      }, 20000, 100);
      return ok;
    };

    // ---- health
    check(await serving(), 'health: Health/Check("") is SERVING');
    const hs = await unary(health, 'Check', { service: 'h3000.RDMASvc' }).catch((e) => ({ status: e.message }));
    check(hs.status === 'SERVING', `health: Health/Check("h3000.RDMASvc") is SERVING (${hs.status})`);

    // ---- seed ControlStream: 500 GUID frames, no waferId, ms timestamps, no Negotiate
    {
      const sent = Array.from({ length: 500 }, () => crypto.randomUUID());
      const b = bidi(seedc, 'ControlStream');
      await writeAll(b, sent.map((f, i) => ({ frameId: f, addr: String(0x7f0000000000 + i * 2 ** 20),
        rkey: 0x1234, length: String(1 << 20), timestamp: String(Date.now()) })));
      b.call.end();
      const r = await within(b.done, CALL_MS, 'seed ControlStream');
      const ids = r.acks.map((x) => x.frameId);
      const sentSet = new Set(sent);
      check(r.code === grpc.status.OK, `seed ControlStream: status OK (${r.code} ${r.details})`);
      check(r.acks.length === 500, `seed ControlStream: ${r.acks.length} Acks for 500 frames`);
      check(ids.every((f) => sentSet.has(f)), 'seed ControlStream: every Ack names a frame that was sent');
      check(new Set(ids).size === 500, `seed ControlStream: one final Ack per frame (${new Set(ids).size} distinct)`);
      check(r.acks.every((x) => !x.ok && x.msg.trim().length > 0),
            `seed ControlStream: clear NACKs, ok=false with a msg (${r.acks.length ? JSON.stringify(r.acks[0].msg) : '-'})`);
    }

    // ---- seed ControlStream, ids outside the rule (lock-step): ok=false naming the rule, the
    // stream stays usable. A lone UTF-16 surrogate is how a JS client ends up sending
    // bytes that are not UTF-8 (protobufjs writes it as ED A0 80).
    {
      const b = bidi(seedc, 'ControlStream');
      const one = async (fid) => {
        const n = b.acks.length;
        await writeAll(b, [{ frameId: fid, addr: '4096', rkey: 7, length: '4096', timestamp: String(Date.now()) }]);
        await waitFor(() => b.acks.length > n, 10000);
        return b.acks[n];
      };
      // [what, id, msg, Ack.frameId]: the id as sent, or empty where it was over-long or
      // not UTF-8 (h3000.proto), never another id
      for (const [what, fid, rx, ackId] of [['an empty id', '', /empty/i, ''],
        ['a 257-byte id', 'y'.repeat(257), /long|257/i, ''],
        ['an id with a control character', 'ab\x01cd', /control/i, 'ab\x01cd'],
        ['an id that is not UTF-8', 'bad-\ud800-id', /UTF-8/i, '']]) {
        const x = await one(fid);
        check(x && !x.ok && rx.test(x.msg) && /256/.test(x.msg) && x.frameId === ackId,
              `seed ControlStream: ${what}: ok=false, msg names the rule (${x && JSON.stringify(x.msg)}), ` +
              `Ack.frameId ${x && JSON.stringify(x.frameId.slice(0, 20))}`);
      }
      const last = crypto.randomUUID();
      const x = await one(last);
      check(x && x.frameId === last && !x.ok && /RDMA/.test(x.msg), `seed ControlStream: still usable after bad ids (${x && x.frameId})`);
      b.call.end();
      const r = await within(b.done, CALL_MS, 'seed ControlStream bad ids');
      check(r.code === grpc.status.OK && r.acks.length === 5, `seed ControlStream: bad ids, then status OK (${r.code}, ${r.acks.length} Acks for 5)`);
    }

    // ---- Negotiate for the chunk size, then PushFrames 20 x 4 MiB + one GUID, implicit session
    const neg = await unary(svc, 'Negotiate', { versionMin: 1, versionMax: 1, clientName: 'grpc-js',
      transports: ['TRANSPORT_GRPC_STREAM'] }).catch((e) => ({ err: e }));
    check(!neg.err && neg.maxChunkSize > 0 && Number(neg.maxFrameSize) >= FRAME,
          `Negotiate: maxChunkSize ${neg.maxChunkSize}, maxFrameSize ${neg.maxFrameSize}`);
    const chunk = neg.maxChunkSize || (1 << 20);
    {
      const frames = new Map();
      for (let i = 0; i < 20; i++) frames.set(`js-${i}`, crypto.randomBytes(FRAME));
      const guid = crypto.randomUUID();
      frames.set(guid, crypto.randomBytes(FRAME));
      const b = bidi(svc, 'PushFrames');
      const msgs = [];
      for (const [f, d] of frames) msgs.push(...chunksOf(f, d, chunk, { waferId: 'js-wafer', timestamp: String(Date.now()) }));
      check(msgs.every((m) => m.data.length <= chunk), `PushFrames: ${msgs.length} chunks of at most ${chunk} bytes`);
      await writeAll(b, msgs);
      b.call.end();
      const r = await within(b.done, CALL_MS, 'PushFrames');
      check(r.code === grpc.status.OK, `PushFrames: status OK (${r.code} ${r.details})`);
      const o = oneDurableEach(r.acks, [...frames.keys()]);
      check(o.ok, `PushFrames: exactly one ok DURABLE ack for each of ${frames.size} frames` +
            (o.ok ? '' : ` (bad: ${o.bad.slice(0, 3).map((f) => `${f}=${JSON.stringify(o.m.get(f) || [])}`)}; extra: ${o.extra.slice(0, 3)})`));
      const notExact = [...frames].filter(([f, d]) => !sameFile(node.framePath('js-wafer', f), d)).map(([f]) => f);
      check(notExact.length === 0, `PushFrames: ${frames.size} files byte-exact at frames/js-wafer/<id>.frame` +
            (notExact.length ? ` (not: ${notExact.slice(0, 3)})` : ''));
    }

    // ---- a negotiated session gets RECEIVED then DURABLE only when it asked (ackReceived)
    for (const ackReceived of [true, false]) {
      const n = await unary(svc, 'Negotiate', { versionMin: 1, versionMax: 1, clientName: 'grpc-js',
        transports: ['TRANSPORT_GRPC_STREAM'], ackReceived }).catch((e) => ({ err: e }));
      const md = new grpc.Metadata();
      md.set('h3000-session-id', String(n.sessionId));
      const f = `js-neg-${ackReceived}`;
      const d = crypto.randomBytes(200000);
      const call = svc.PushFrames(md, { deadline: deadline(CALL_MS) });
      const acks = [];
      call.on('data', (m) => acks.push(m));
      call.on('error', () => {});
      const done = new Promise((res) => call.on('status', (st) => res(st.code)));
      await writeAll({ call, done }, chunksOf(f, d, chunk, { waferId: 'js-wafer', timestamp: String(Date.now()) }));
      call.end();
      const code = await within(done, CALL_MS, 'negotiated PushFrames');
      const want = ackReceived ? ['ACK_STAGE_RECEIVED', 'ACK_STAGE_DURABLE'] : ['ACK_STAGE_DURABLE'];
      check(!n.err && code === grpc.status.OK && acks.every((x) => x.ok && x.frameId === f) &&
            JSON.stringify(acks.map((x) => x.stage)) === JSON.stringify(want) && sameFile(node.framePath('js-wafer', f), d),
            `Negotiate ackReceived=${ackReceived}: acks ${JSON.stringify(acks.map((x) => x.stage))}, file byte-exact`);
    }

    // ---- a seed-shaped frame over PushFrames: no waferId, ms timestamp
    {
      const f = crypto.randomUUID();
      const d = crypto.randomBytes(300000);
      const ts = Date.now();
      const b = bidi(svc, 'PushFrames');
      await writeAll(b, chunksOf(f, d, chunk, { timestamp: String(ts) }));
      b.call.end();
      const r = await within(b.done, CALL_MS, 'PushFrames without waferId');
      const o = oneDurableEach(r.acks, [f]);
      check(r.code === grpc.status.OK && o.ok,
            `no waferId: one ok DURABLE ack (${JSON.stringify(r.acks.map((x) => [x.ok, x.stage, x.msg]))})`);
      let row = null;
      try {
        const out = execFileSync('sqlite3', ['-readonly', '-json', path.join(node.data, 'catalog.db'),
          `SELECT wafer_id, timestamp, path FROM frames WHERE frame_id = '${f}'`], { timeout: 10000 }).toString();
        row = (out.trim() ? JSON.parse(out) : [])[0] || null;
      } catch (e) { row = { err: e.message }; }
      check(row && !row.err && row.wafer_id && String(row.timestamp) === String(ts),
            `no waferId: catalogued under a default wafer with the timestamp as sent (${JSON.stringify(row)}, sent ${ts})`);
      const p = row && row.path ? (path.isAbsolute(row.path) ? row.path : path.join(node.data, row.path)) : '';
      check(row && sameFile(node.framePath(row.wafer_id, f), d) && (!p || sameFile(p, d)),
            `no waferId: file byte-exact at frames/${row && row.wafer_id}/${f}.frame`);
    }

    // ---- 8 concurrent PushFrames streams
    {
      const calls = [];
      const all = new Map();
      for (let k = 0; k < 8; k++) {
        const frames = new Map();
        for (let n = 0; n < 4; n++) frames.set(`js-c${k}-${n}`, crypto.randomBytes(512 * 1024 + k * 4099 + n));
        for (const [f, d] of frames) all.set(f, d);
        const b = bidi(svc, 'PushFrames');
        const msgs = [];
        for (const [f, d] of frames) msgs.push(...chunksOf(f, d, 128 * 1024, { waferId: 'js-conc', timestamp: String(Date.now()) }));
        calls.push({ frames, b, w: writeAll(b, msgs).then(() => b.call.end()) });
      }
      const rs = await within(Promise.all(calls.map((c) => c.w.then(() => c.b.done))), CALL_MS, '8 streams');
      check(rs.every((r) => r.code === grpc.status.OK), `8 concurrent streams: all end OK (${rs.map((r) => r.code)})`);
      check(calls.every((c, i) => oneDurableEach(rs[i].acks, [...c.frames.keys()]).ok),
            '8 concurrent streams: one ok DURABLE ack per frame on each stream');
      const notExact = [...all].filter(([f, d]) => !sameFile(node.framePath('js-conc', f), d)).map(([f]) => f);
      check(notExact.length === 0, `8 concurrent streams: ${all.size} files byte-exact` +
            (notExact.length ? ` (not: ${notExact.slice(0, 3)})` : ''));
    }

    // ---- deadline and cancel mid-stream: the node stays healthy
    const afterwards = async (what) => {
      check(await serving(), `${what}: health still SERVING`);
      check(await slotsBack(), `${what}: every pool slot back, nothing in flight (Stats)`);
      const f = `js-after-${what.replace(/[^a-z]+/g, '-')}`;
      const d = crypto.randomBytes(100000);
      const b = bidi(svc, 'PushFrames');
      await writeAll(b, chunksOf(f, d, chunk, { waferId: 'js-wafer', timestamp: String(Date.now()) }));
      b.call.end();
      const r = await within(b.done, CALL_MS, `${what}: following stream`);
      check(r.code === grpc.status.OK && oneDurableEach(r.acks, [f]).ok && sameFile(node.framePath('js-wafer', f), d),
            `${what}: a following stream stores a frame (DURABLE, byte-exact)`);
    };
    {
      const b = bidi(svc, 'PushFrames', 500);
      const d = crypto.randomBytes(FRAME);
      await writeAll(b, chunksOf('js-deadline', d, chunk, { waferId: 'js-wafer', timestamp: String(Date.now()) }).slice(0, 1));
      const r = await within(b.done, 10000, 'deadline');
      check(r.code === grpc.status.DEADLINE_EXCEEDED, `deadline mid-frame: DEADLINE_EXCEEDED (${r.code} ${r.details})`);
      await afterwards('deadline');
      check(!fs.existsSync(node.framePath('js-wafer', 'js-deadline')), 'deadline: the partial frame is not stored');
    }
    {
      const b = bidi(svc, 'PushFrames');
      const d = crypto.randomBytes(FRAME);
      await writeAll(b, chunksOf('js-cancel', d, chunk, { waferId: 'js-wafer', timestamp: String(Date.now()) }).slice(0, 2));
      await waitFor(async () => {
        try { return (await unary(svc, 'Stats', {}, 5000)).framesInFlight !== '0'; } catch (e) { return false; }
      }, CALL_MS);   // a watchdog, not a budget: the node may be slow (a busy machine, ASan)
      b.call.cancel();
      const r = await within(b.done, 10000, 'cancel');
      check(r.code === grpc.status.CANCELLED, `PushFrames cancelled mid-frame: CANCELLED (${r.code})`);
      await afterwards('push cancel');
      check(!fs.existsSync(node.framePath('js-wafer', 'js-cancel')), 'push cancel: the partial frame is not stored');
    }
    {
      // the writer is still sending (20000 frames queued) when the call is cancelled
      const b = bidi(seedc, 'ControlStream');
      const sent = Array.from({ length: 20000 }, () => crypto.randomUUID());
      const w = writeAll(b, sent.map((f) => ({ frameId: f, addr: '4096', rkey: 7, length: '4096',
        timestamp: String(Date.now()) }))).catch(() => false);
      await waitFor(() => b.acks.length >= 50, CALL_MS);   // a watchdog, as above
      b.call.cancel();
      const r = await within(b.done, 10000, 'ControlStream cancel');
      await within(w, 10000, 'ControlStream writer');
      check(r.code === grpc.status.CANCELLED && r.acks.length >= 50 && r.acks.length < sent.length,
            `seed ControlStream cancelled mid-stream: CANCELLED after ${r.acks.length} of ${sent.length} Acks`);
      await afterwards('control cancel');
    }

    // ---- unknown method / service
    for (const m of ['/h3000.RDMASvc/NoSuchMethod', '/h3000.NoSuchService/ControlStream']) {
      const e = await new Promise((res) => svc.makeUnaryRequest(m, (x) => x, (x) => x, Buffer.alloc(0),
        { deadline: deadline(5000) }, (err) => res(err)));
      check(e && e.code === grpc.status.UNIMPLEMENTED, `${m}: UNIMPLEMENTED (${e && e.code})`);
    }
    check(await serving(), 'health: still SERVING at the end');
  } catch (e) {
    check(false, 'unexpected error: ' + (e && e.stack ? e.stack : e));
  } finally {
    for (const c of clients) c.close();
    const alive = !node.exit;
    const st = await node.stop();
    check(alive && st.code === 0, `ingestd was up to the end and exits 0 on SIGTERM (${JSON.stringify(st)})`);
    if (failures.length) console.log('--- ingestd log (tail)\n' + node.tail());
    clearTimeout(watchdog);
  }
  const rc = summary();
  if (!rc) fs.rmSync(node.data, { recursive: true, force: true });  // 100 MiB of frames
  process.exit(rc);
}

main();
