// examples/typescript-worker/worker.mjs, run as a user runs it: its own
// package (npm install links the SDK), a real server, a worker token.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startServer, adminClient, makeToken, PATIENCE, repoRoot } from './helpers.mjs';

const example = join(repoRoot, 'examples', 'typescript-worker');
let srv;
let c;

before(async () => {
  // npm install of a file: dependency links it; nothing is downloaded.
  execFileSync('npm', ['install', '--no-package-lock', '--no-audit', '--no-fund'], { cwd: example, stdio: 'ignore' });
  srv = await startServer();
  c = adminClient(srv.url, srv.token);
});

after(async () => {
  await srv?.stop();
  srv?.cleanup();
});

function runExample(args, token, extraEnv = {}) {
  const p = spawn(process.execPath, ['worker.mjs', ...args], {
    cwd: example,
    env: { ...process.env, HEPH_ADDR: srv.url, HEPH_TOKEN: token, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  p.out = '';
  p.err = '';
  p.stdout.on('data', (b) => { p.out += b.toString(); });
  p.stderr.on('data', (b) => { p.err += b.toString(); });
  p.done = new Promise((r) => p.once('exit', (code, signal) => r({ code, signal })));
  return p;
}

test('the example worker runs the thumbnails flow started from elsewhere, and stops on SIGTERM', { timeout: PATIENCE }, async () => {
  const token = await makeToken(c, { principal: 'ts-example', kind: 'service', role: 'worker' });
  const w = runExample([], token);
  try {
    const r = await c.start('example.thumbnails', { url: 'https://example.com/dog.png', sizes: [32, 48] });
    const out = await c.result(r.id, { timeoutMs: PATIENCE });
    assert.deepEqual(out.resize ?? out, [32, 48].map((size) => ({ size, thumbnail: `thumb-${size}.png` })));
    const logs = await c.runLogs({ path: { id: r.id } });
    const records = logs.records || logs.logs || [];
    assert.ok(records.some((l) => l.message === 'fetched the image'), `the example's step log reached the server: ${JSON.stringify(logs).slice(0, 300)}`);
  } finally {
    w.kill('SIGTERM');
  }
  const { code, signal } = await w.done;
  assert.equal(signal, null, `the example exits by itself on SIGTERM: ${w.err}`);
  assert.equal(code, 0, `exit code: ${w.err}`);
});

test('the example fails a bad input for good, without retries', { timeout: PATIENCE }, async () => {
  const token = await makeToken(c, { principal: 'ts-example-2', kind: 'service', role: 'worker' });
  const w = runExample([], token);
  try {
    const r = await c.start('example.thumbnails', { url: 'ftp://nope', sizes: [32] });
    await assert.rejects(c.result(r.id, { timeoutMs: PATIENCE }), (err) => /not an http\(s\) URL/.test(JSON.stringify(err.run ?? err.message)));
    const steps = (await c.get(r.id)).steps || [];
    const fetch = steps.find((s) => s.name === 'fetch');
    assert.ok(fetch, `the run has its fetch step: ${JSON.stringify(steps).slice(0, 300)}`);
    assert.equal(fetch.attempts, 1, `a non-retryable failure is not retried: ${JSON.stringify(fetch)}`);
  } finally {
    w.kill('SIGTERM');
    await w.done;
  }
});

test('the example with --start starts a run and prints its output', { timeout: PATIENCE }, async () => {
  const token = await makeToken(c, { principal: 'ts-example-3', kind: 'service', role: 'worker' });
  const starter = await makeToken(c, { principal: 'ts-example-starter', kind: 'service', role: 'operator' });
  const p = runExample(['--start'], token, { HEPH_CLIENT_TOKEN: starter });
  const { code } = await p.done;
  assert.equal(code, 0, `the example exits 0: ${p.err}`);
  const { run, output } = JSON.parse(p.out.trim());
  assert.deepEqual(output.resize ?? output, [64, 128, 256].map((size) => ({ size, thumbnail: `thumb-${size}.png` })));
  assert.equal((await c.get(run)).status, 'completed');
});
