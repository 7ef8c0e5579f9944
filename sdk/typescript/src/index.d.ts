export * from './client.js';
export * from './worker.js';
export * from './errors.js';
export { OPERATIONS } from './operations.js';
export type { OperationId, Operations } from './operations.js';
export type { OperationRequest, OperationResult, CallOptions } from './types.js';
export type { paths, components, operations } from './schema.js';
