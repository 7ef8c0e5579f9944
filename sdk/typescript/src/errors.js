// Errors of the SDK: every non-2xx answer of the server is an RFC 9457
// problem (application/problem+json), thrown as a HephError or one of its
// subclasses by status (and, for 409, by problem type).

/** An error answer of the server. */
export class HephError extends Error {
  constructor(problem, { method, url, status } = {}) {
    const p = problem && typeof problem === 'object' ? problem : {};
    const st = Number.isInteger(p.status) ? p.status : status;
    const what = p.detail || p.title || `HTTP ${st}`;
    super(method && url ? `${method} ${url}: ${st} ${what}` : `${st} ${what}`);
    this.name = new.target.name;
    this.status = st;
    this.type = typeof p.type === 'string' ? p.type : 'about:blank';
    this.title = typeof p.title === 'string' ? p.title : '';
    this.detail = typeof p.detail === 'string' ? p.detail : '';
    this.instance = typeof p.instance === 'string' ? p.instance : undefined;
    this.fix = typeof p.fix === 'string' ? p.fix : undefined;
    this.errors = Array.isArray(p.errors) ? p.errors : undefined;
    this.problem = p;
  }
}

export class BadRequestError extends HephError {}
export class UnauthorizedError extends HephError {}
export class ForbiddenError extends HephError {}
export class NotFoundError extends HephError {}
export class ConflictError extends HephError {}
/** 409 lease-lost: the task token's claim no longer holds the task; the worker drops its result. */
export class LeaseLostError extends ConflictError {}

/** The server could not be reached (connection refused, reset, timed out). */
export class ConnectionError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'ConnectionError';
  }
}

/** A run result() waited for ended failed, cancelled or otherwise not completed. */
export class RunFailedError extends Error {
  constructor(run) {
    const r = run && typeof run === 'object' ? run : {};
    super(`run ${r.id} ended ${r.status}${r.error ? ': ' + r.error : ''}`);
    this.name = 'RunFailedError';
    this.run = r;
    this.runId = r.id;
    this.status = r.status;
  }
}

/** result() gave up waiting (timeoutMs passed) before the run ended. */
export class TimeoutError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/** Throw it from a worker's handler to fail the step without a retry. */
export class NonRetryableError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'NonRetryableError';
  }
}

/** The error class for a problem answer. */
export function problemError(problem, ctx) {
  const p = problem && typeof problem === 'object' ? problem : {};
  const status = Number.isInteger(p.status) ? p.status : ctx.status;
  switch (status) {
    case 400: return new BadRequestError(p, ctx);
    case 401: return new UnauthorizedError(p, ctx);
    case 403: return new ForbiddenError(p, ctx);
    case 404: return new NotFoundError(p, ctx);
    case 409:
      if (typeof p.type === 'string' && p.type.endsWith('/lease-lost')) return new LeaseLostError(p, ctx);
      return new ConflictError(p, ctx);
    default: return new HephError(p, ctx);
  }
}
