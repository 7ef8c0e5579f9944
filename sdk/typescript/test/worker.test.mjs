// The worker against a real heph server: document actions and a Go
// flow's remote steps only it runs, failures, cancellation, a worker
// killed while it holds a task, and a server restarted mid-poll.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Worker, NonRetryableError, RunFailedError } from '../src/index.js';
import { startServer, adminClient, makeToken, eventually, putDocument, PATIENCE } from './helpers.mjs';

const here = dirname(fileURLToPath(import.meta.url));
let srv;
let c;
let workerToken;
const quiet = { logger: null };

before(async () => {
  srv = await startServer();
  c = adminClient(srv.url, srv.token);
  workerToken = await makeToken(c, { principal: 'ts-worker', kind: 'service', role: 'worker' });
});
after(async () => {
  await srv?.stop();
  srv?.cleanup();
});

function newWorker(opts = {}) {
  return new Worker({ addr: srv.url, token: workerToken, wait: '5s', ...quiet, ...opts });
}

/** Runs fn with a running worker, then stops it. */
async function withWorker(w, fn) {
  const running = w.run();
  try {
    return await fn();
  } finally {
    await w.stop({ graceMs: 10_000 });
    await running;
  }
}

test('a worker runs a document action the server has no code for, with its logs', { timeout: PATIENCE }, async () => {
  await putDocument(c, 'ts.greet', 'ts.greet');
  const w = newWorker().action('ts.greet', async (task, args) => {
    assert.equal(task.kind, 'step');
    assert.equal(task.attempt, 1);
    task.info('greeting', { value: args.value });
    return { greeting: 'hello ' + args.value };
  });
  await withWorker(w, async () => {
    const r = await c.start('ts.greet', { value: 'ann' }, { kind: 'document', idempotencyKey: 'ts-greet-1' });
    const out = await c.result(r.id, { timeoutMs: PATIENCE });
    assert.deepEqual(out.work ?? out, { greeting: 'hello ann' });
    const logs = await c.runLogs({ path: { id: r.id } });
    const records = logs.records || logs.logs || [];
    assert.ok(records.some((l) => l.message === 'greeting' && l.attrs?.value === 'ann'), `the task's log reached the server: ${JSON.stringify(logs).slice(0, 500)}`);
  });
});

test('a worker runs example.thumbnails: a remote step and a remote map step', { timeout: PATIENCE }, async () => {
  const w = newWorker({ maxTasks: 3 })
    .step('example.fetch_image', async (task, doc) => ({ fetched: doc.input.url }))
    .step('example.resize', async (task, size) => ({ size, thumb: `thumb-${size}` }));
  await withWorker(w, async () => {
    const r = await c.start('example.thumbnails', { url: 'https://example.com/cat.png', sizes: [64, 128, 256] });
    const out = await c.result(r.id, { timeoutMs: PATIENCE });
    assert.deepEqual(out.resize ?? out, [64, 128, 256].map((size) => ({ size, thumb: `thumb-${size}` })));
  });
});

test('NonRetryableError fails the run at once; other errors are retried', { timeout: PATIENCE }, async () => {
  await putDocument(c, 'ts.flaky', 'ts.flaky', '    retry: {max_attempts: 3, initial_backoff: 100ms}\n');
  await putDocument(c, 'ts.broken', 'ts.broken', '    retry: {max_attempts: 3, initial_backoff: 100ms}\n');
  let brokenCalls = 0;
  const w = newWorker()
    .action('ts.flaky', async (task) => {
      if (task.attempt < 2) throw new Error('transient');
      return { attempt: task.attempt };
    })
    .action('ts.broken', async () => {
      brokenCalls++;
      throw new NonRetryableError('no way');
    });
  await withWorker(w, async () => {
    const f = await c.start('ts.flaky', { value: 'x' }, { kind: 'document' });
    const out = await c.result(f.id, { timeoutMs: PATIENCE });
    assert.deepEqual(out.work ?? out, { attempt: 2 });
    const b = await c.start('ts.broken', { value: 'x' }, { kind: 'document' });
    await assert.rejects(c.result(b.id, { timeoutMs: PATIENCE }), (err) => err instanceof RunFailedError && /no way/.test(JSON.stringify(err.run)));
    assert.equal(brokenCalls, 1, 'a non-retryable failure is not retried');
  });
});

test('a handler sees its run cancelled through task.signal', { timeout: PATIENCE }, async () => {
  await putDocument(c, 'ts.wait', 'ts.wait');
  let started;
  const startedP = new Promise((r) => { started = r; });
  let seen;
  const seenP = new Promise((r) => { seen = r; });
  const w = newWorker({ lease: '3s' }).action('ts.wait', async (task) => {
    started(task);
    await new Promise((resolve) => task.signal.addEventListener('abort', resolve, { once: true }));
    seen(task.cancelReason);
    throw task.signal.reason;
  });
  await withWorker(w, async () => {
    const r = await c.start('ts.wait', { value: 'x' }, { kind: 'document' });
    const task = await startedP;
    assert.equal(task.runId, r.id);
    await c.cancel(r.id, { reason: 'test' });
    assert.equal(await seenP, 'cancelled');
    await assert.rejects(c.result(r.id, { timeoutMs: PATIENCE }), (err) => err instanceof RunFailedError && err.status === 'cancelled');
  });
});

function spawnWorker(id, dir) {
  const p = spawn(process.execPath, [join(here, 'fixtures', 'worker.mjs')], {
    env: { ...process.env, HEPH_ADDR: srv.url, HEPH_TOKEN: workerToken, WORKER_ID: id, LEASE: '3s' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  p.stderr.on('data', (b) => { p.log = (p.log || '') + b.toString(); });
  p.done = new Promise((r) => p.once('exit', r));
  return p;
}

test('a worker killed while it holds a task: a second worker completes it, recorded once', { timeout: PATIENCE * 2 }, async () => {
  await putDocument(c, 'ts.slow', 'ts.slow', '    retry: {max_attempts: 5, initial_backoff: 100ms}\n',
    '{started_dir: "{{input.started_dir}}", until_file: "{{input.until_file}}"}');
  const dir = mkdtempSync(join(tmpdir(), 'heph-ts-kill-'));
  const untilFile = join(dir, 'release');
  const a = spawnWorker('ts-a', dir);
  let b;
  try {
    const r = await c.start('ts.slow', { value: 'x', started_dir: dir, until_file: untilFile }, { kind: 'document' });
    await eventually(() => readdirSync(dir).includes('ts-a'), 'worker a to hold the task');
    a.kill('SIGKILL');
    await a.done;
    b = spawnWorker('ts-b', dir);
    await eventually(() => readdirSync(dir).includes('ts-b'), 'worker b to hold the task (after a\'s lease expired)');
    writeFileSync(untilFile, 'go');
    const out = await c.result(r.id, { timeoutMs: PATIENCE });
    assert.deepEqual(out.work ?? out, { worker: 'ts-b' });
    const run = await c.get(r.id);
    const step = run.steps.find((s) => s.name === 'work');
    assert.equal(step.status, 'completed');
    const h = await c.history(r.id);
    const completions = h.events.filter((e) => e.kind === 'step_completed'); // the document has the one step
    assert.equal(completions.length, 1, `the step's completion is recorded once: ${JSON.stringify(h.events.map((e) => e.kind))}`);
  } finally {
    a.kill('SIGKILL');
    if (b) {
      b.kill('SIGTERM');
      await b.done;
    }
  }
});

test('a worker reconnects after the server restarts mid-poll', { timeout: PATIENCE * 2 }, async () => {
  await putDocument(c, 'ts.after_restart', 'ts.after_restart');
  const messages = [];
  const w = newWorker({ wait: '20s', logger: (m) => messages.push(m) }).action('ts.after_restart', async (task, args) => ({ echoed: args.value }));
  const running = w.run();
  try {
    // Let the worker's long poll reach the server, then stop the server.
    await eventually(async () => (await c.listWorkers()).some?.((x) => x.id === w.workerId || x.worker_id === w.workerId)
      || JSON.stringify(await c.listWorkers()).includes(w.workerId), 'the worker to claim');
    await srv.stop('SIGTERM');
    await eventually(() => messages.some((m) => /claim failed/.test(m)), 'the worker to see the server gone');
    const addr = new URL(srv.url).host;
    const token = srv.token;
    srv = { ...(await startServer({ dir: srv.dir, addr, firstStart: false })), token };
    c = adminClient(srv.url, token);
    const r = await c.start('ts.after_restart', { value: 'back' }, { kind: 'document' });
    const out = await c.result(r.id, { timeoutMs: PATIENCE });
    assert.deepEqual(out.work ?? out, { echoed: 'back' });
  } finally {
    await w.stop({ graceMs: 10_000 });
    await running;
  }
});
