// The test suite's server: heph server on loopback with a SQLite file in a
// temporary directory, from $HEPH_BIN, else built from the repository.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '../src/index.js';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '..', '..', '..');

/** Generous bound of every wait for an event; nothing asserts on time. */
export const PATIENCE = 120_000;

let built;
/** The heph binary: $HEPH_BIN, else one built into a temporary directory. */
export function hephBin() {
  if (process.env.HEPH_BIN) {
    if (!existsSync(process.env.HEPH_BIN)) throw new Error(`HEPH_BIN=${process.env.HEPH_BIN} does not exist`);
    return process.env.HEPH_BIN;
  }
  if (built) return built;
  const dir = mkdtempSync(join(tmpdir(), 'heph-bin-'));
  const out = join(dir, 'heph');
  execFileSync('go', ['build', '-o', out, './cmd/heph'], { cwd: repoRoot, stdio: 'inherit' });
  built = out;
  return out;
}

/**
 * Starts heph server; answers {url, token, proc, stop(), dir, db}. addr:
 * "127.0.0.1:0" by default. On a first start the server makes the admin
 * token and prints its secret once: token is it (undefined on a restart).
 */
export async function startServer({ dir, addr = '127.0.0.1:0', extraArgs = [], firstStart = true } = {}) {
  dir = dir || mkdtempSync(join(tmpdir(), 'heph-ts-'));
  const db = join(dir, 'heph.db');
  const proc = spawn(hephBin(), ['server', '--addr', addr, '--sqlite', db, '--log-level', 'warn', ...extraArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  let token;
  const url = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`heph server did not say it listens within ${PATIENCE} ms: ${stderr}`)), PATIENCE);
    proc.stderr.on('data', (b) => {
      stderr += b.toString();
      const m = /heph: listening on (\S+)/.exec(stderr);
      const tok = /export HEPH_TOKEN=(\S+)/.exec(stderr);
      if (m && (tok || !firstStart)) { clearTimeout(t); token = tok?.[1]; res(m[1]); }
    });
    proc.once('exit', (code) => { clearTimeout(t); rej(new Error(`heph server exited (${code}): ${stderr}`)); });
  });
  proc.stderr.on('data', () => {});
  const stop = async (signal = 'SIGTERM') => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill(signal);
    await exited;
  };
  return { url, token, proc, stop, dir, db, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Polls fn until it answers a truthy value, at most PATIENCE. */
export async function eventually(fn, what = 'the condition', patience = PATIENCE) {
  const deadline = Date.now() + patience;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`waited ${patience} ms for ${what}${last ? ': ' + last.message : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Makes a token of a role with the admin client. */
export async function makeToken(admin, body) {
  const t = await admin.createToken({ body });
  return t.token;
}

export function adminClient(url, token) {
  return new Client({ addr: url, token });
}

/** A small document whose action the server has no Go code for: only an HTTP worker runs it. */
export async function putDocument(admin, name, action, extra = '', args = '{value: "{{input.value}}"}') {
  const content = `name: ${name}\nsteps:\n  work:\n    action: ${action}\n    args: ${args}\n${extra}    done: true\n`;
  return admin.putDocument({ body: { name, format: 'yaml', content } });
}
