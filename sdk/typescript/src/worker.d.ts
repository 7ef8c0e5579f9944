import type { Client } from './client.js';

export declare const MAX_PER_REQUEST: number;
export declare const MAX_BUFFERED: number;
export declare const MAX_MESSAGE: number;
export declare const MAX_ATTRS: number;

export interface LogRecord {
  time: string;
  level: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  message: string;
  attrs?: Record<string, unknown>;
}
export declare function logRecord(message: unknown, level?: string, attrs?: Record<string, unknown>): LogRecord;
/** A Go duration ("30s", "1m30s", "500ms") in milliseconds. */
export declare function parseDuration(d: string | number): number;

/** One claimed task. */
export declare class Task {
  readonly raw: Record<string, any>;
  readonly token: string;
  readonly runId: string;
  readonly kind: 'step' | 'activity' | string;
  readonly name: string;
  readonly workflow: string;
  readonly step: string;
  readonly index?: number;
  readonly attempt: number;
  readonly queue: string;
  readonly input: any;
  /** The details of the last heartbeat of an earlier attempt, to resume from. */
  readonly details: any;
  readonly deadline?: Date;
  readonly heartbeatTimeoutMs: number;
  /** Aborted when the run is cancelled, the lease is lost, or the worker's shutdown grace ends. */
  readonly signal: AbortSignal;
  readonly cancelled: boolean;
  readonly cancelReason?: 'cancelled' | 'lease-lost' | 'shutdown';
  log(message: string, level?: string, attrs?: Record<string, unknown>): void;
  debug(message: string, attrs?: Record<string, unknown>): void;
  info(message: string, attrs?: Record<string, unknown>): void;
  warn(message: string, attrs?: Record<string, unknown>): void;
  error(message: string, attrs?: Record<string, unknown>): void;
  upsertSearchAttributes(attrs: Record<string, unknown>): void;
  /** Records progress details and heartbeats now. */
  heartbeat(details?: unknown): Promise<{ cancelled: boolean; error?: unknown }>;
}

export type Handler<I = any, O = any> = (task: Task, input: I) => O | Promise<O>;

export interface WorkerOptions {
  addr?: string;
  token?: string;
  /** A client to use instead of one made from addr and token. */
  client?: Client;
  workerId?: string;
  /** The queues to claim from (default ["default"]). */
  queues?: string[];
  /** At most this many tasks at once (default 4). */
  maxTasks?: number;
  /** The claim's long poll (default "20s"). */
  wait?: string;
  /** The lease per task, a Go duration (default: the server's). */
  lease?: string;
  fetch?: typeof fetch;
  /** Where the worker's own messages go (default stderr; null: nowhere). */
  logger?: ((msg: string) => void) | null;
}

export declare class Worker {
  constructor(opts: WorkerOptions);
  readonly workerId: string;
  readonly queues: string[];
  readonly maxTasks: number;
  readonly running: number;
  action<I = any, O = any>(name: string, fn: Handler<I, O>): this;
  step<I = any, O = any>(handler: string, fn: Handler<I, O>): this;
  activity<I = any, O = any>(name: string, fn: Handler<I, O>): this;
  run(): Promise<void>;
  stop(opts?: { graceMs?: number }): Promise<void>;
  handleSignals(opts?: { graceMs?: number }): () => void;
}
