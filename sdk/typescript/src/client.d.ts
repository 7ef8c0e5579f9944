import type { components, operations } from './schema.js';
import type { Operations, OperationId } from './operations.js';
import type { CallOptions, OperationRequest, OperationResult } from './types.js';

export type Schemas = components['schemas'];
export type Run = Schemas['Run'];
export type RunList = Schemas['RunList'];
export type History = Schemas['History'];
export type RunKind = 'flow' | 'document' | 'workflow' | 'job';

export declare const TERMINAL_STATUSES: readonly string[];
export declare function normalizeAddr(addr: string): string;

export interface ClientOptions {
  /** The server's address: "http://127.0.0.1:7070" (a scheme-less "host:port" is http). */
  addr: string;
  /** A bearer token of the API. */
  token?: string;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof fetch;
  /** The default request timeout, 90 s. */
  timeoutMs?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

export interface StartOptions extends Omit<CallOptions, 'signal'> {
  /** Aborts the request (signal is the message of signal-with-start). */
  abortSignal?: AbortSignal;
  /** flow (default), document, workflow or job. */
  kind?: RunKind;
  /** The Idempotency-Key header: a repeated start answers the same run. */
  idempotencyKey?: string;
  /** The business key's value (business_value): a job kind's unique key, a flow's business id. */
  businessKey?: string;
  businessValue?: string;
  /** A workflow start: the workflow id. */
  workflowId?: string;
  version?: number;
  tags?: string[];
  metadata?: Record<string, unknown>;
  searchAttributes?: Record<string, unknown>;
  concurrencyKey?: string;
  executionTimeout?: string;
  onBehalfOf?: string;
  /** Signal-with-start (kind workflow). */
  signal?: Schemas['StartRun']['signal'];
  /** Update-with-start (kind workflow). */
  update?: Schemas['StartRun']['update'];
}

export interface ResultOptions {
  /** Give up (TimeoutError) after this long; default no limit. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Answer the whole run rather than its output. */
  run?: boolean;
  /** Keep polling through connection failures (default true). */
  retryConnection?: boolean;
}

export type ListFilter = NonNullable<operations['listRuns']['parameters']['query']> & Record<string, unknown>;

export interface Client extends Operations {}
export declare class Client {
  constructor(opts: ClientOptions);
  readonly addr: string;
  token?: string;
  timeoutMs: number;

  /** One request of an operation: {status, headers, body}. Throws HephError for a non-2xx answer. */
  request<K extends OperationId>(operationId: K, req?: OperationRequest<operations[K]>, opts?: CallOptions): Promise<{ status: number; headers: Headers; body: OperationResult<operations[K]> }>;
  /** One request of an operation: its decoded body. */
  call<K extends OperationId>(operationId: K, req?: OperationRequest<operations[K]>, opts?: CallOptions): Promise<OperationResult<operations[K]>>;

  start(name: string, input?: unknown, opts?: StartOptions): Promise<Run>;
  get(runId: string): Promise<Run>;
  result<T = unknown>(runId: string, opts?: ResultOptions & { run?: false }): Promise<T>;
  result(runId: string, opts: ResultOptions & { run: true }): Promise<Run>;
  list(filter?: ListFilter, opts?: CallOptions): AsyncGenerator<Run, void, void>;
  history(runId: string, opts?: { after?: number; wait?: string }): Promise<History>;

  signal(runId: string, name: string, payload?: unknown, opts?: { id?: string }): Promise<OperationResult<operations['signal']>>;
  signal(req: OperationRequest<operations['signal']>, opts?: CallOptions): Promise<OperationResult<operations['signal']>>;
  update(runId: string, name: string, args?: unknown, opts?: { id?: string; waitFor?: 'accepted' | 'completed'; timeout?: string }): Promise<Schemas['UpdateResult']>;
  update(req: OperationRequest<operations['update']>, opts?: CallOptions): Promise<OperationResult<operations['update']>>;
  query(runId: string, name: string, args?: unknown): Promise<Schemas['QueryResult']>;
  query(req: OperationRequest<operations['query']>, opts?: CallOptions): Promise<OperationResult<operations['query']>>;
  approve(runId: string, step: string, opts?: { comment?: string }): Promise<OperationResult<operations['approve']>>;
  approve(req: OperationRequest<operations['approve']>, opts?: CallOptions): Promise<OperationResult<operations['approve']>>;
  reject(runId: string, step: string, opts?: { comment?: string }): Promise<OperationResult<operations['reject']>>;
  reject(req: OperationRequest<operations['reject']>, opts?: CallOptions): Promise<OperationResult<operations['reject']>>;
  cancel(runId: string, opts?: { reason?: string }): Promise<OperationResult<operations['cancel']>>;
  cancel(req: OperationRequest<operations['cancel']>, opts?: CallOptions): Promise<OperationResult<operations['cancel']>>;
  retry(runId: string): Promise<Run>;
  retry(req: OperationRequest<operations['retry']>, opts?: CallOptions): Promise<OperationResult<operations['retry']>>;
  sendEvent(name: string, data?: unknown, opts?: { id?: string }): Promise<Schemas['SentEvent']>;
  sendEvent(req: OperationRequest<operations['sendEvent']>, opts?: CallOptions): Promise<OperationResult<operations['sendEvent']>>;
}
