/** The problem+json body of an error answer (RFC 9457). */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  instance?: string;
  fix?: string;
  errors?: Array<{ path?: string; message?: string; line?: number; column?: number }>;
  [key: string]: unknown;
}

/** An error answer of the server. */
export declare class HephError extends Error {
  constructor(problem: Problem | undefined, ctx?: { method?: string; url?: string; status?: number });
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly instance?: string;
  readonly fix?: string;
  readonly errors?: Problem['errors'];
  readonly problem: Problem;
}
export declare class BadRequestError extends HephError {}
export declare class UnauthorizedError extends HephError {}
export declare class ForbiddenError extends HephError {}
export declare class NotFoundError extends HephError {}
export declare class ConflictError extends HephError {}
/** 409 lease-lost: the task token's claim no longer holds the task. */
export declare class LeaseLostError extends ConflictError {}
/** The server could not be reached. */
export declare class ConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown });
}
/** A run result() waited for did not complete. */
export declare class RunFailedError extends Error {
  constructor(run: any);
  readonly run: any;
  readonly runId: string;
  readonly status: string;
}
/** result() gave up waiting before the run ended. */
export declare class TimeoutError extends Error {
  constructor(message: string);
}
/** Throw it from a worker's handler to fail the step without a retry. */
export declare class NonRetryableError extends Error {
  constructor(message: string, options?: { cause?: unknown });
}
export declare function problemError(problem: Problem | undefined, ctx: { method?: string; url?: string; status: number }): HephError;
