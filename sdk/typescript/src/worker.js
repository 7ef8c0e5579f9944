// A worker of heph server's HTTP worker protocol (docs/api.md, "The
// worker protocol"): it long-polls POST /api/v1/tasks/claim for the
// actions (document actions, remote steps of Go flows) and activities it
// has handlers for, runs each task while heartbeating its lease, and
// completes or fails it with the fenced token the claim handed out.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { Client } from './client.js';
import { BadRequestError, LeaseLostError, NonRetryableError } from './errors.js';

// Bounds of the log records a task buffers and sends: the server takes at
// most 1000 records per request and 16 KiB of message and attributes per
// record; a task keeps its newest MAX_BUFFERED records.
export const MAX_PER_REQUEST = 1000;
export const MAX_BUFFERED = 1000;
export const MAX_MESSAGE = 8000;
export const MAX_ATTRS = 8000;
const LEVELS = ['DEBUG', 'INFO', 'WARN', 'ERROR'];
const enc = new TextEncoder();

/** A log record as the server takes it, cut to its bounds. */
export function logRecord(message, level = 'INFO', attrs) {
  let lv = String(level).toUpperCase();
  if (lv === 'WARNING') lv = 'WARN';
  if (!LEVELS.includes(lv)) lv = 'INFO';
  let msg = String(message);
  const bytes = enc.encode(msg);
  if (bytes.length > MAX_MESSAGE) {
    msg = new TextDecoder().decode(bytes.slice(0, MAX_MESSAGE - 16)).replace(/\uFFFD+$/, '') + '...[truncated]';
  }
  const rec = { time: new Date().toISOString(), level: lv, message: msg };
  if (attrs && typeof attrs === 'object' && Object.keys(attrs).length) {
    let text;
    try {
      text = JSON.stringify(attrs, (_k, v) => (typeof v === 'bigint' ? String(v) : v instanceof Error ? String(v.stack || v) : v));
    } catch (err) {
      text = JSON.stringify({ unserializable: String(err.message) });
    }
    const n = enc.encode(text).length;
    if (n > MAX_ATTRS) text = JSON.stringify({ truncated: `the attributes were ${n} bytes` });
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) rec.attrs = parsed;
  }
  return rec;
}

/** Parses the Go durations the server sends ("30s", "1m30s", "500ms") into milliseconds. */
export function parseDuration(d) {
  if (typeof d === 'number') return d;
  if (typeof d !== 'string' || d === '') throw new TypeError(`bad duration ${JSON.stringify(d)}`);
  const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, 'µs': 1e-3, ns: 1e-6 };
  const re = /(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)/gy;
  let total = 0;
  let i = 0;
  let m;
  if (d === '0') return 0;
  while ((m = re.exec(d))) {
    total += parseFloat(m[1]) * units[m[2]];
    i = re.lastIndex;
  }
  if (i !== d.length) throw new TypeError(`bad duration ${JSON.stringify(d)}`);
  return total;
}

/** One claimed task. */
export class Task {
  constructor(worker, raw) {
    this._worker = worker;
    this.raw = raw;
    this.token = raw.token;
    this.runId = raw.run_id ?? '';
    this.kind = raw.kind ?? '';
    this.name = raw.name ?? '';
    this.workflow = raw.workflow ?? '';
    this.step = raw.step ?? '';
    this.index = raw.index;
    this.attempt = raw.attempt ?? 1;
    this.queue = raw.queue ?? '';
    this.input = raw.input;
    this.details = raw.details;
    this.deadline = raw.deadline ? new Date(raw.deadline) : undefined;
    let hb = 30_000;
    try {
      if (raw.heartbeat_timeout) hb = parseDuration(raw.heartbeat_timeout);
    } catch { /* keep the default */ }
    this.heartbeatTimeoutMs = hb > 0 ? hb : 30_000;
    this._ctl = new AbortController();
    /** Aborted when the run is cancelled, the lease is lost, or the worker's grace ends. */
    this.signal = this._ctl.signal;
    this._logs = [];
    this._dropped = 0;
    this._details = undefined;
    this._hasDetails = false;
    this._attrs = {};
    this._hbChain = Promise.resolve();
  }

  /** Why the task's signal was aborted: "cancelled", "lease-lost", "shutdown", or undefined. */
  get cancelReason() { return this._reason; }
  get cancelled() { return this.signal.aborted; }

  _abort(reason) {
    if (this.signal.aborted) return;
    this._reason = reason;
    const err = new Error(reason === 'cancelled' ? `the run ${this.runId} was cancelled` : reason === 'lease-lost' ? `the lease of the task was lost (another worker may hold it)` : `the worker is shutting down`);
    err.name = 'AbortError';
    err.reason = reason;
    this._ctl.abort(err);
  }

  log(message, level = 'INFO', attrs) {
    this._logs.push(logRecord(message, level, attrs));
    if (this._logs.length > MAX_BUFFERED) {
      const drop = this._logs.length - MAX_BUFFERED;
      this._logs.splice(0, drop);
      this._dropped += drop;
    }
  }
  debug(message, attrs) { this.log(message, 'DEBUG', attrs); }
  info(message, attrs) { this.log(message, 'INFO', attrs); }
  warn(message, attrs) { this.log(message, 'WARN', attrs); }
  error(message, attrs) { this.log(message, 'ERROR', attrs); }

  _takeLogs() {
    let logs = this._logs;
    const dropped = this._dropped;
    this._logs = [];
    this._dropped = 0;
    if (dropped) {
      logs.unshift(logRecord(`${dropped} earlier records were dropped by the worker (it keeps ${MAX_BUFFERED})`, 'WARN', { dropped }));
    }
    if (logs.length > MAX_PER_REQUEST) {
      this._logs = logs.slice(MAX_PER_REQUEST).concat(this._logs);
      logs = logs.slice(0, MAX_PER_REQUEST);
    }
    return logs;
  }
  _putBackLogs(logs) {
    if (logs.length) this._logs = logs.concat(this._logs);
  }

  /** Upserts search attributes of the task's run, sent with the completion. */
  upsertSearchAttributes(attrs) {
    Object.assign(this._attrs, attrs);
  }

  /**
   * Records progress details (a retry reads them back as task.details)
   * and heartbeats now; answers {cancelled}. Errors other than a lost
   * lease are logged, not thrown: the periodic heartbeat tries again.
   */
  heartbeat(details) {
    if (details !== undefined) {
      this._details = details;
      this._hasDetails = true;
    }
    return this._heartbeatNow();
  }

  _heartbeatNow() {
    const p = this._hbChain.then(() => this._sendHeartbeat());
    this._hbChain = p.catch(() => {});
    return p;
  }

  async _sendHeartbeat() {
    if (this._done || this.signal.aborted) return { cancelled: this.signal.aborted };
    const body = { token: this.token };
    if (this._hasDetails) {
      body.details = this._details;
      this._hasDetails = false;
    }
    const logs = this._takeLogs();
    if (logs.length) body.logs = logs;
    try {
      const res = await this._worker._client.call('heartbeatTask', { body }, { timeoutMs: Math.max(this.heartbeatTimeoutMs / 3, 5000) });
      if (res && res.cancelled) this._abort('cancelled');
      return { cancelled: !!(res && res.cancelled) };
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this._abort('lease-lost');
        return { cancelled: true };
      }
      this._putBackLogs(logs);
      if ('details' in body && !this._hasDetails) {
        this._details = body.details;
        this._hasDetails = true;
      }
      this._worker._log(`heartbeat of ${this.name} (run ${this.runId}) failed: ${err.message}`);
      return { cancelled: false, error: err };
    }
  }
}

export class Worker {
  /**
   * @param {{addr: string, token?: string, workerId?: string, queues?: string[], maxTasks?: number,
   *   wait?: string, lease?: string, fetch?: typeof fetch, logger?: ((msg: string) => void) | null,
   *   client?: Client}} opts
   */
  constructor(opts = {}) {
    if (!opts || typeof opts !== 'object') throw new TypeError('new Worker({ addr, token }): want an options object');
    this._client = opts.client || new Client({ addr: opts.addr, token: opts.token, fetch: opts.fetch });
    this.workerId = opts.workerId || `ts-${hostname()}-${randomUUID().slice(0, 8)}`;
    this.queues = opts.queues && opts.queues.length ? [...opts.queues] : ['default'];
    const max = opts.maxTasks ?? 4;
    if (!Number.isInteger(max) || max < 1) throw new TypeError(`maxTasks: want an integer >= 1, got ${max}`);
    this.maxTasks = max;
    this.wait = opts.wait ?? '20s';
    parseDuration(this.wait);
    this.lease = opts.lease;
    if (this.lease !== undefined) parseDuration(this.lease);
    this.logger = opts.logger === undefined ? (msg) => process.stderr.write(`heph worker ${this.workerId}: ${msg}\n`) : opts.logger;
    this.actions = new Map();
    this.activities = new Map();
    this._running = new Set();
    this._stopping = false;
    this._stopCtl = new AbortController();
    this._runPromise = null;
    this._wake = null;
  }

  _log(msg) {
    if (this.logger) {
      try { this.logger(msg); } catch { /* a logger's failure is not the worker's */ }
    }
  }

  _register(map, what, name, fn) {
    if (typeof name !== 'string' || !name) throw new TypeError(`${what}: want a handler name`);
    if (typeof fn !== 'function') throw new TypeError(`${what} ${name}: want a function (task, input) => output`);
    if (map.has(name)) throw new Error(`${what} ${name} is registered already`);
    map.set(name, fn);
    return this;
  }

  /** Registers a document action (or a Go flow's remote step): fn(task, args). */
  action(name, fn) { return this._register(this.actions, 'action', name, fn); }
  /** Registers the handler of a Go flow's remote step (flow.Remote, flow.RemoteMap): the same protocol as actions. */
  step(handler, fn) { return this._register(this.actions, 'step', handler, fn); }
  /** Registers a workflow activity: fn(task, input). */
  activity(name, fn) { return this._register(this.activities, 'activity', name, fn); }

  /** The tasks running now. */
  get running() { return this._running.size; }

  /** Claims and runs tasks until stop(); resolves once stopped and the running tasks ended (or the grace passed). */
  run() {
    if (this._runPromise) return this._runPromise;
    if (this.actions.size + this.activities.size === 0) {
      return Promise.reject(new Error('the worker has no handlers: register some with action, step or activity first'));
    }
    this._runPromise = this._loop();
    return this._runPromise;
  }

  async _loop() {
    let backoff = 500;
    this._log(`claiming actions [${[...this.actions.keys()]}] activities [${[...this.activities.keys()]}] on ${this._client.addr}`);
    while (!this._stopping) {
      const free = this.maxTasks - this._running.size;
      if (free <= 0) {
        await new Promise((resolve) => { this._wake = resolve; });
        continue;
      }
      const body = {
        worker_id: this.workerId,
        actions: [...this.actions.keys()].sort(),
        activities: [...this.activities.keys()].sort(),
        queues: this.queues,
        max_tasks: free,
        wait: this.wait,
      };
      if (this.lease !== undefined) body.lease = this.lease;
      let tasks;
      try {
        const res = await this._client.call('claimTasks', { body }, { signal: this._stopCtl.signal, timeoutMs: parseDuration(this.wait) + 30_000 });
        tasks = (res && res.tasks) || [];
        backoff = 500;
      } catch (err) {
        if (this._stopping) break;
        this._log(`claim failed: ${err.message} (retrying in ${backoff} ms)`);
        await sleep(backoff, this._stopCtl.signal).catch(() => {});
        backoff = Math.min(backoff * 2, 10_000);
        continue;
      }
      for (const raw of tasks) {
        const task = new Task(this, raw);
        const p = this._runTask(task).finally(() => {
          this._running.delete(entry);
          if (this._wake) { const w = this._wake; this._wake = null; w(); }
        });
        const entry = { task, promise: p };
        this._running.add(entry);
      }
    }
    await this._drained;
  }

  /**
   * Stops claiming and waits for the running tasks up to graceMs
   * (default: without limit); then aborts their signals (reason
   * "shutdown") and resolves. run() resolves too.
   */
  async stop(opts = {}) {
    if (!this._stopping) {
      this._stopping = true;
      const grace = opts.graceMs;
      this._drained = (async () => {
        const all = Promise.allSettled([...this._running].map((e) => e.promise));
        if (grace === undefined || grace === null || grace === Infinity) {
          await all;
        } else {
          let t;
          const timedOut = await Promise.race([all.then(() => false), new Promise((r) => { t = setTimeout(() => r(true), Math.max(0, grace)); })]);
          clearTimeout(t);
          if (timedOut) {
            this._log(`the grace of ${grace} ms passed with ${this._running.size} task(s) running: aborting them`);
            for (const e of this._running) e.task._abort('shutdown');
          }
        }
      })();
      this._stopCtl.abort(new Error('the worker is stopping'));
      if (this._wake) { const w = this._wake; this._wake = null; w(); }
    }
    await this._drained;
    if (this._runPromise) await this._runPromise;
  }

  /** Stops the worker on SIGTERM and SIGINT (with opts.graceMs); answers a function that removes the handlers. */
  handleSignals(opts = {}) {
    const on = (sig) => {
      this._log(`${sig}: stopping`);
      this.stop(opts).catch(() => {});
    };
    process.once('SIGTERM', on);
    process.once('SIGINT', on);
    return () => {
      process.removeListener('SIGTERM', on);
      process.removeListener('SIGINT', on);
    };
  }

  async _runTask(task) {
    const fn = (task.kind === 'activity' ? this.activities : this.actions).get(task.name);
    let timer;
    const every = Math.max(task.heartbeatTimeoutMs / 3, 50);
    const beat = () => {
      timer = setTimeout(async () => {
        await task._heartbeatNow().catch(() => {});
        if (!task._done && !task.signal.aborted) beat();
      }, every);
    };
    beat();
    let outcome;
    try {
      if (!fn) throw new NonRetryableError(`this worker has no handler for ${task.kind} ${JSON.stringify(task.name)}`);
      const output = await fn(task, task.input);
      const body = { token: task.token, output: output === undefined ? null : output };
      try {
        JSON.stringify(body);
      } catch (err) {
        throw new NonRetryableError(`the handler's output is not JSON: ${err.message}`);
      }
      if (Object.keys(task._attrs).length) body.search_attributes = task._attrs;
      outcome = ['completeTask', body];
    } catch (err) {
      const message = errorMessage(err);
      const retryable = !(err instanceof NonRetryableError || err?.name === 'NonRetryableError');
      if (retryable) {
        this._log(`task ${task.name} of run ${task.runId} failed: ${err?.stack || message}`);
        task.error('the task failed; it is retried', { error: message });
      } else {
        task.error('the task failed for good', { error: message });
      }
      const body = { token: task.token, error: message, retryable };
      if (task._hasDetails) body.details = task._details;
      outcome = ['failTask', body];
    } finally {
      task._done = true;
      clearTimeout(timer);
    }
    await task._hbChain;
    if (task.signal.aborted && task.cancelReason !== 'shutdown') {
      this._log(`task ${task.name} of run ${task.runId}: ${task.cancelReason}; nothing to report`);
      return;
    }
    const logs = task._takeLogs();
    if (logs.length) outcome[1].logs = logs;
    await this._report(task, outcome);
  }

  async _report(task, [op, body]) {
    for (let attempt = 1; ; attempt++) {
      try {
        try {
          await this._client.call(op, { body });
        } catch (err) {
          if (!(err instanceof BadRequestError) || !body.search_attributes) throw err;
          // Refused attributes write nothing and leave the claim held:
          // the task fails for good, saying why.
          op = 'failTask';
          body = { token: task.token, error: err.detail || err.message, retryable: false, logs: body.logs };
          await this._client.call(op, { body });
        }
        this._log(`task ${task.name} of run ${task.runId} (attempt ${task.attempt}): ${op === 'completeTask' ? 'completed' : 'failed: ' + body.error}`);
        return;
      } catch (err) {
        if (err instanceof LeaseLostError) {
          this._log(`task ${task.name} of run ${task.runId}: the server refused the result: ${err.detail || err.message}`);
          return;
        }
        // A connection failure: try a few times (the server may be
        // restarting), then leave it to the lease, which expires and the
        // task runs again.
        if (err?.name !== 'ConnectionError' || attempt >= 5 || this._stopCtl.signal.aborted && attempt >= 2) {
          this._log(`task ${task.name} of run ${task.runId}: report failed: ${err.message}`);
          return;
        }
        await sleep(500 * 2 ** attempt);
      }
    }
  }
}

function errorMessage(err) {
  if (err instanceof Error) return err.name && err.name !== 'Error' ? `${err.name}: ${err.message}` : err.message;
  try {
    return typeof err === 'string' ? err : JSON.stringify(err);
  } catch {
    return String(err);
  }
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    function onAbort() { clearTimeout(t); reject(signal.reason); }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
