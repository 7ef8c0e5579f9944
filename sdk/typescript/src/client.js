// Client of heph server's HTTP API: one method per operation of the
// OpenAPI document (generated, see operations.js), and high-level helpers
// on top of them.
import { OPERATIONS } from './operations.js';
import { ConnectionError, HephError, RunFailedError, TimeoutError, problemError } from './errors.js';

export const TERMINAL_STATUSES = Object.freeze(['completed', 'failed', 'cancelled', 'continued']);
const KINDS = ['flow', 'document', 'workflow', 'job'];

/** The base URL of a server address: "127.0.0.1:7070" or "http://host:port/". */
export function normalizeAddr(addr) {
  if (typeof addr !== 'string' || addr.trim() === '') {
    throw new TypeError('addr: want the server address, such as "http://127.0.0.1:7070"');
  }
  let a = addr.trim();
  if (!/^https?:\/\//i.test(a)) a = 'http://' + a;
  let u;
  try {
    u = new URL(a);
  } catch {
    throw new TypeError(`addr: ${JSON.stringify(addr)} is not a URL`);
  }
  return u.origin + u.pathname.replace(/\/+$/, '');
}

export class Client {
  /**
   * @param {{addr: string, token?: string, fetch?: typeof fetch, timeoutMs?: number, headers?: Record<string,string>}} opts
   */
  constructor(opts = {}) {
    if (!opts || typeof opts !== 'object') throw new TypeError('new Client({ addr, token }): want an options object');
    this.addr = normalizeAddr(opts.addr);
    if (opts.token !== undefined && opts.token !== null && typeof opts.token !== 'string') {
      throw new TypeError('token: want a string');
    }
    this.token = opts.token || undefined;
    this._fetch = opts.fetch || globalThis.fetch;
    if (typeof this._fetch !== 'function') throw new TypeError('fetch: want a function (Node >= 20 has a global fetch)');
    this.timeoutMs = opts.timeoutMs ?? 90_000;
    this.headers = { ...(opts.headers || {}) };
  }

  /**
   * Sends one request of an operation and answers {status, headers, body}
   * (the body decoded from JSON, text otherwise; a stream operation's
   * body is the Response). Throws a HephError for a non-2xx answer.
   */
  async request(operationId, req = {}, opts = {}) {
    const op = OPERATIONS[operationId];
    if (!op) throw new TypeError(`unknown operation ${JSON.stringify(operationId)}`);
    if (req === null || typeof req !== 'object') throw new TypeError(`${operationId}: want a request object {path, query, header, body}`);
    let path = op.path;
    for (const name of op.pathParams) {
      const v = req.path?.[name];
      if (v === undefined || v === null || v === '') {
        throw new TypeError(`${operationId}: path parameter ${name} is required`);
      }
      path = path.replace(`{${name}}`, encodeURIComponent(String(v)));
    }
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query || {})) {
      if (v === undefined || v === null) continue;
      if (Array.isArray(v)) for (const x of v) qs.append(k, String(x));
      else if (v instanceof Date) qs.append(k, v.toISOString());
      else if (typeof v === 'object') {
        // meta.<key>=<value> filters, given as {meta: {k: v}}
        for (const [sk, sv] of Object.entries(v)) if (sv !== undefined && sv !== null) qs.append(`${k}.${sk}`, String(sv));
      } else qs.append(k, String(v));
    }
    const url = this.addr + path + (qs.size ? '?' + qs.toString() : '');
    const headers = { Accept: op.stream ? 'text/event-stream' : 'application/json', ...this.headers };
    if (this.token) headers.Authorization = 'Bearer ' + this.token;
    for (const [k, v] of Object.entries(req.header || {})) if (v !== undefined && v !== null) headers[k] = String(v);
    let body;
    if (req.body !== undefined) {
      if (!op.body) throw new TypeError(`${operationId} takes no body`);
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(req.body);
    } else if (op.bodyRequired) {
      throw new TypeError(`${operationId}: a body is required`);
    }
    const ctl = new AbortController();
    const timeoutMs = opts.timeoutMs ?? (op.stream ? 0 : this.timeoutMs);
    const timer = timeoutMs > 0 ? setTimeout(() => ctl.abort(new TimeoutError(`${op.method} ${url}: no answer within ${timeoutMs} ms`)), timeoutMs) : null;
    const onAbort = () => ctl.abort(opts.signal.reason);
    if (opts.signal) {
      if (opts.signal.aborted) ctl.abort(opts.signal.reason);
      else opts.signal.addEventListener('abort', onAbort, { once: true });
    }
    try {
      let res;
      try {
        res = await this._fetch(url, { method: op.method, headers, body, signal: ctl.signal });
      } catch (err) {
        if (ctl.signal.aborted) throw ctl.signal.reason ?? err;
        throw new ConnectionError(`${op.method} ${url}: ${err?.cause?.code || err?.cause?.message || err.message}`, { cause: err });
      }
      if (op.stream && res.ok) return { status: res.status, headers: res.headers, body: res };
      let text;
      try {
        text = await res.text();
      } catch (err) {
        if (ctl.signal.aborted) throw ctl.signal.reason ?? err;
        throw new ConnectionError(`${op.method} ${url}: reading the answer: ${err.message}`, { cause: err });
      }
      let data = text;
      const ct = res.headers.get('content-type') || '';
      if (text && /json/.test(ct)) {
        try {
          data = JSON.parse(text);
        } catch {
          if (res.ok) throw new HephError({ title: 'bad answer', detail: `the server's answer is not JSON: ${text.slice(0, 200)}` }, { method: op.method, url, status: res.status });
        }
      } else if (!text) data = undefined;
      if (!res.ok) throw problemError(typeof data === 'object' ? data : { detail: String(data || res.statusText) }, { method: op.method, url, status: res.status });
      return { status: res.status, headers: res.headers, body: data };
    } finally {
      if (timer) clearTimeout(timer);
      if (opts.signal) opts.signal.removeEventListener('abort', onAbort);
    }
  }

  /** Sends one request of an operation and answers its decoded body. */
  async call(operationId, req, opts) {
    return (await this.request(operationId, req, opts)).body;
  }

  // High-level helpers ------------------------------------------------

  /**
   * Starts a run of a flow (the default kind), document, workflow or job
   * kind. opts: kind, idempotencyKey, businessKey (business_value),
   * workflowId, version, tags, metadata, searchAttributes,
   * concurrencyKey, executionTimeout, signal, update (signal- and
   * update-with-start), timeoutMs, abortSignal.
   */
  async start(name, input, opts = {}) {
    if (typeof name !== 'string' || !name) throw new TypeError('start: want the name of a flow, document, workflow or job kind');
    const kind = opts.kind ?? 'flow';
    if (!KINDS.includes(kind)) throw new TypeError(`start: kind ${JSON.stringify(kind)}: want one of ${KINDS.join(', ')}`);
    const body = { name, kind };
    if (input !== undefined) body.input = input;
    const map = {
      businessKey: 'business_value', businessValue: 'business_value', workflowId: 'workflow_id', version: 'version',
      tags: 'tags', metadata: 'metadata', searchAttributes: 'search_attributes', concurrencyKey: 'concurrency_key',
      executionTimeout: 'execution_timeout', signal: 'signal', update: 'update', onBehalfOf: 'on_behalf_of',
    };
    for (const [k, f] of Object.entries(map)) if (opts[k] !== undefined) body[f] = opts[k];
    const header = {};
    if (opts.idempotencyKey !== undefined) header['Idempotency-Key'] = opts.idempotencyKey;
    // opts.signal is signal-with-start's message, not an AbortSignal.
    return this.call('startRun', { header, body }, { timeoutMs: opts.timeoutMs, signal: opts.abortSignal });
  }

  /** A run, by id or business id key::value. */
  async get(runId) {
    return this.call('getRun', { path: { id: runId } });
  }

  /**
   * Waits for a run to end (long polls of GET /runs/{id}/result) and
   * answers its output; throws RunFailedError when it did not complete,
   * TimeoutError after timeoutMs (default: no limit). {run: true}
   * answers the whole run instead of its output.
   */
  async result(runId, opts = {}) {
    const deadline = opts.timeoutMs ? Date.now() + opts.timeoutMs : Infinity;
    let backoff = 250;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`run ${runId} did not end within ${opts.timeoutMs} ms`);
      const wait = Math.max(1, Math.min(20, Math.floor(left / 1000)));
      let res;
      try {
        res = await this.request('runResult', { path: { id: runId }, query: { wait: `${wait}s` } }, { signal: opts.signal, timeoutMs: (wait + 30) * 1000 });
      } catch (err) {
        if (!(err instanceof ConnectionError) || opts.retryConnection === false) throw err;
        await sleep(Math.min(backoff, Math.max(0, deadline - Date.now())), opts.signal);
        backoff = Math.min(backoff * 2, 5000);
        continue;
      }
      backoff = 250;
      const run = res.body;
      if (res.status === 200 && run && TERMINAL_STATUSES.includes(run.status)) {
        if (run.status === 'completed' || run.status === 'continued') return opts.run ? run : run.output;
        throw new RunFailedError(run);
      }
    }
  }

  /** Iterates over the runs a filter lists (query of GET /runs), page by page. */
  async *list(filter = {}, opts = {}) {
    let cursor = filter.cursor;
    for (;;) {
      const page = await this.call('listRuns', { query: { ...filter, cursor } }, opts);
      for (const r of page.runs || []) yield r;
      if (!page.next) return;
      cursor = page.next;
    }
  }

  /** A run's history after seq `after` (wait: a Go duration to long-poll). */
  async history(runId, opts = {}) {
    return this.call('runHistory', { path: { id: runId }, query: { after: opts.after, wait: opts.wait } });
  }

  /** Sends a signal to a workflow run. opts.id: the signal's id, to deliver it once. */
  async signal(runId, name, payload, opts = {}) {
    const body = {};
    if (payload !== undefined) body.payload = payload;
    if (opts.id !== undefined) body.id = opts.id;
    return this.call('signal', { path: { id: runId, name }, body });
  }

  /** Sends an update to a workflow run; answers {result, stage}. opts: id, waitFor, timeout. */
  async update(runId, name, args, opts = {}) {
    const body = {};
    if (args !== undefined) body.args = args;
    if (opts.id !== undefined) body.id = opts.id;
    if (opts.waitFor !== undefined) body.wait_for = opts.waitFor;
    if (opts.timeout !== undefined) body.timeout = opts.timeout;
    return this.call('update', { path: { id: runId, name }, body });
  }

  /** Queries a workflow run; answers {result}. */
  async query(runId, name, args) {
    const body = {};
    if (args !== undefined) body.args = args;
    return this.call('query', { path: { id: runId, name }, body });
  }

  /** Approves an approval gate of a run. */
  async approve(runId, step, opts = {}) {
    return this.call('approve', { path: { id: runId, step }, body: opts.comment !== undefined ? { comment: opts.comment } : {} });
  }

  /** Rejects an approval gate of a run. */
  async reject(runId, step, opts = {}) {
    return this.call('reject', { path: { id: runId, step }, body: opts.comment !== undefined ? { comment: opts.comment } : {} });
  }

  /** Cancels a run. */
  async cancel(runId, opts = {}) {
    return this.call('cancel', { path: { id: runId }, body: opts.reason !== undefined ? { reason: opts.reason } : {} });
  }

  /** Runs a failed run again. */
  async retry(runId) {
    return this.call('retry', { path: { id: runId } });
  }

  /** Stores an event ({name, data, id}); answers it (duplicate: true when the id was sent before). */
  async sendEvent(name, data, opts = {}) {
    const body = { name };
    if (data !== undefined) body.data = data;
    if (opts.id !== undefined) body.id = opts.id;
    return this.call('sendEvent', { body });
  }
}

for (const id of Object.keys(OPERATIONS)) {
  if (Object.prototype.hasOwnProperty.call(Client.prototype, id)) continue; // a helper of the same name
  Object.defineProperty(Client.prototype, id, {
    value: function (req, opts) { return this.call(id, req || {}, opts); },
    writable: true,
    configurable: true,
  });
}

// The helpers that share an operation's name take the operation's
// request object too, so every operationId is callable the generated way.
for (const id of ['signal', 'update', 'query', 'approve', 'reject', 'cancel', 'retry', 'sendEvent']) {
  const helper = Client.prototype[id];
  Object.defineProperty(Client.prototype, id, {
    value: function (first, ...rest) {
      if (first !== null && typeof first === 'object') return this.call(id, first, rest[0]);
      return helper.call(this, first, ...rest);
    },
    writable: true,
    configurable: true,
  });
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    function onAbort() { clearTimeout(t); reject(signal.reason); }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
