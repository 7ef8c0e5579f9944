// The client against a real heph server: the high-level calls on every
// kind of run, and errors as exceptions.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  Client, NotFoundError, BadRequestError, ConflictError, UnauthorizedError, HephError, RunFailedError, ConnectionError,
} from '../src/index.js';
import { startServer, adminClient, makeToken, eventually, PATIENCE } from './helpers.mjs';

let srv;
let c;
before(async () => {
  srv = await startServer();
  c = adminClient(srv.url, srv.token);
});
after(async () => {
  await srv?.stop();
  srv?.cleanup();
});

const order = (id) => ({ id, customer: 'cust-' + id, region: 'eu', items: [{ sku: 'sku-1', qty: 2, price: 350 }] });

test('start a flow with an idempotency key and a business key; get; result', { timeout: PATIENCE }, async () => {
  const r1 = await c.start('example.order', order('ts-1'), { idempotencyKey: 'ts-order-1', businessKey: 'ts-1', tags: ['ts'] });
  assert.equal(r1.kind, 'flow');
  assert.equal(r1.workflow, 'example.order');
  const out = await c.result(r1.id, { timeoutMs: PATIENCE });
  // (While the run is active, the server answers a repeat of a flow start
  // that holds a business key with 409 duplicate; after it, the same run.)
  const r2 = await c.start('example.order', order('ts-1'), { idempotencyKey: 'ts-order-1', businessKey: 'ts-1', tags: ['ts'] });
  assert.equal(r2.id, r1.id, 'the same Idempotency-Key answers the same run');
  assert.ok(out && typeof out === 'object', `an output: ${JSON.stringify(out)}`);
  const run = await c.get(r1.id);
  assert.equal(run.status, 'completed');
  assert.deepEqual(run.output, out);
  // A business id names the run too.
  const byKey = await c.get(run.business_id);
  assert.equal(byKey.id, r1.id);
  const h = await c.history(r1.id);
  assert.ok(h.events.length > 0);
  assert.equal(typeof h.last, 'number');
  const later = await c.history(r1.id, { after: h.last, wait: '1s' });
  assert.equal(later.events.length, 0);
});

test('start a job with a business key, and list with filters over pages', { timeout: PATIENCE }, async () => {
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const r = await c.start('example.email', { to: `u${i}@example.com`, subject: 'hi' }, { kind: 'job', businessKey: `ts-mail-${i}`, idempotencyKey: `ts-mail-${i}` });
    assert.equal(r.kind, 'job');
    const again = await c.start('example.email', { to: `u${i}@example.com`, subject: 'hi' }, { kind: 'job', businessKey: `ts-mail-${i}`, idempotencyKey: `ts-mail-${i}` });
    assert.equal(again.id, r.id, 'the same Idempotency-Key answers the same run');
    ids.push(r.id);
  }
  for (const id of ids) await c.result(id, { timeoutMs: PATIENCE });
  const seen = [];
  for await (const r of c.list({ kind: 'flow', status: 'completed', workflow: 'example.email', limit: 1 })) {
    assert.equal(r.kind, 'job');
    assert.equal(r.workflow, 'example.email');
    assert.equal(r.status, 'completed');
    seen.push(r.id);
  }
  for (const id of ids) assert.ok(seen.includes(id), `list over pages of one has ${id}`);
  assert.equal(new Set(seen).size, seen.length, 'no run twice');
  const only = [];
  for await (const r of c.list({ id: ids.slice(0, 2) })) only.push(r.id);
  assert.deepEqual(only.sort(), ids.slice(0, 2).sort());
});

test('a workflow: query, update, signal, result', { timeout: PATIENCE }, async () => {
  const r = await c.start('example.onboarding', { customer: 'ts', email: 'ts@example.com', region: 'eu' }, { kind: 'workflow', workflowId: 'ts-onb-1', idempotencyKey: 'ts-onb-1' });
  assert.equal(r.kind, 'workflow');
  await eventually(async () => (await c.query(r.id, 'status')).result?.stage === 'awaiting activation', 'the activation phase');
  const u = await c.update(r.id, 'change_plan', 'team', { waitFor: 'completed' });
  assert.equal(u.result.plan, 'team');
  await assert.rejects(c.update(r.id, 'change_plan', 'no-such-plan', { waitFor: 'completed' }), (err) => err instanceof HephError && err.status >= 400);
  await c.signal(r.id, 'activate', { by: 'ts' });
  const out = await c.result(r.id, { timeoutMs: PATIENCE });
  assert.equal(out.plan, 'team');
  await assert.rejects(c.signal(r.id, 'activate', { by: 'ts' }), ConflictError, 'a signal to an ended run is a conflict');
});

test('signal-with-start: the signal reaches the new run, a retry delivers it once', { timeout: PATIENCE }, async () => {
  const signup = { customer: 'ts-sws', email: 'ts-sws@example.com', region: 'eu' };
  const opts = { kind: 'workflow', workflowId: 'ts-onb-sws', idempotencyKey: 'ts-onb-sws', signal: { name: 'activate', payload: { by: 'ts' } } };
  const r = await c.start('example.onboarding', signup, opts);
  const again = await c.start('example.onboarding', signup, opts);
  assert.equal(again.id, r.id, 'the retried start names the same run');
  const out = await c.result(r.id, { timeoutMs: PATIENCE });
  assert.equal(out.plan, 'free');
  const h = await c.history(r.id);
  const signals = h.events.filter((e) => e.kind === 'signal_received' || e.name === 'activate');
  assert.equal(signals.length, 1, `one activate signal in the history: ${JSON.stringify(h.events.map((e) => [e.kind, e.name]))}`);
  const ctl = new AbortController();
  ctl.abort(new Error('stop'));
  await assert.rejects(c.start('example.onboarding', signup, { kind: 'workflow', abortSignal: ctl.signal }), /stop|abort/i);
});

test('a document with an approval gate: approve and reject', { timeout: PATIENCE }, async () => {
  const approver = new Client({ addr: srv.url, token: await makeToken(c, { principal: 'ts-manager', kind: 'user', groups: ['managers', 'finance'], role: 'approver' }) });
  const waitGate = (id) => eventually(async () => (await c.get(id)).status === 'waiting', 'the gate');
  const a = await c.start('example.expense', { employee: 'ann', amount: 100, category: 'travel' }, { kind: 'document', idempotencyKey: 'ts-exp-a' });
  assert.equal(a.kind, 'document');
  await waitGate(a.id);
  await approver.approve(a.id, 'manager_approval', { comment: 'ok' });
  await c.result(a.id, { timeoutMs: PATIENCE });
  const ar = await c.get(a.id);
  assert.equal(ar.steps.find((s) => s.name === 'reimburse')?.status, 'completed');

  const b = await c.start('example.expense', { employee: 'bob', amount: 900, category: 'travel' }, { kind: 'document' });
  await waitGate(b.id);
  await assert.rejects(approver.approve(b.id, 'manager_approval'), (err) => err instanceof HephError && err.status >= 400 && err.status < 500, 'manager_approval is not the gate waiting');
  await approver.reject(b.id, 'finance_approval', { comment: 'too much' });
  await c.result(b.id, { timeoutMs: PATIENCE });
  const br = await c.get(b.id);
  assert.notEqual(br.steps.find((s) => s.name === 'reimburse')?.status, 'completed');
});

test('cancel a waiting run; result throws RunFailedError; retry a failed run', { timeout: PATIENCE }, async () => {
  const r = await c.start('example.expense', { employee: 'cy', amount: 10, category: 'food' }, { kind: 'document' });
  await eventually(async () => (await c.get(r.id)).status === 'waiting', 'the gate');
  await c.cancel(r.id, { reason: 'ts test' });
  await assert.rejects(c.result(r.id, { timeoutMs: PATIENCE }), (err) => err instanceof RunFailedError && err.status === 'cancelled');
  await assert.rejects(c.retry(r.id), ConflictError, 'a cancelled run is not retryable');

  // A job that fails for good: an email to no address is cancelled by the
  // job; one with a failing step retried. Use a document that fails.
  await c.putDocument({ body: { name: 'ts.fails', format: 'yaml', content: 'name: ts.fails\nsteps:\n  boom:\n    action: ts.never_served\n    timeout: 1s\n    retry: {max_attempts: 1}\n    done: true\n' } });
  const f = await c.start('ts.fails', {}, { kind: 'document' });
  await c.cancel(f.id);
  await assert.rejects(c.result(f.id, { timeoutMs: PATIENCE }), RunFailedError);
});

test('events: sendEvent (deduplicated by id) and listEvents', { timeout: PATIENCE }, async () => {
  const e1 = await c.sendEvent('ts.happened', { n: 1 }, { id: 'ts-ev-1' });
  assert.equal(e1.name, 'ts.happened');
  const e2 = await c.sendEvent('ts.happened', { n: 1 }, { id: 'ts-ev-1' });
  assert.equal(e2.duplicate, true);
  const list = await c.listEvents({ query: { name: 'ts.happened' } });
  assert.equal(list.events.length, 1);
  assert.deepEqual(list.events[0].data, { n: 1 });
});

test('errors are exceptions: 404, 400, 401, connection refused, bad arguments', { timeout: PATIENCE }, async () => {
  await assert.rejects(c.get('no-such-run'), (err) => {
    assert.ok(err instanceof NotFoundError);
    assert.equal(err.status, 404);
    assert.match(err.type, /not-found$/);
    assert.ok(err.detail.length > 0);
    return true;
  });
  await assert.rejects(c.start('example.nope', {}), (err) => err instanceof NotFoundError || err instanceof BadRequestError);
  await assert.rejects(c.listRuns({ query: { status: 'runing' } }), (err) => {
    assert.ok(err instanceof BadRequestError);
    assert.equal(err.status, 400);
    assert.equal(err.title, 'Bad Request');
    return true;
  });
  await assert.rejects(c.startRun({ body: { name: 'example.order', bogus: 1 } }), BadRequestError);
  await assert.rejects(new Client({ addr: srv.url, token: 'wrong' }).listRuns(), UnauthorizedError);
  await assert.rejects(new Client({ addr: 'http://127.0.0.1:1' }).healthz(), ConnectionError);
  assert.throws(() => new Client({}), TypeError);
  assert.throws(() => new Client({ addr: 'http://[bad' }), TypeError);
  await assert.rejects(c.getRun({}), TypeError);
  await assert.rejects(c.start('x', {}, { kind: 'nope' }), TypeError);
});

test('the generated operations: whoami, definitions, openapi', { timeout: PATIENCE }, async () => {
  const me = await c.whoami();
  assert.equal(me.role, 'admin');
  const defs = await c.definitions();
  const names = (Array.isArray(defs) ? defs : defs.definitions || []).map((d) => d.name);
  assert.ok(names.includes('example.thumbnails'), `definitions: ${names}`);
  const spec = await c.openapi();
  assert.ok(spec.paths['/api/v1/runs']);
});
