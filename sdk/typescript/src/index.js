export { Client, normalizeAddr, TERMINAL_STATUSES } from './client.js';
export { Worker, Task, logRecord, parseDuration, MAX_PER_REQUEST, MAX_BUFFERED, MAX_MESSAGE, MAX_ATTRS } from './worker.js';
export { OPERATIONS } from './operations.js';
export {
  HephError, BadRequestError, UnauthorizedError, ForbiddenError, NotFoundError, ConflictError, LeaseLostError,
  ConnectionError, RunFailedError, TimeoutError, NonRetryableError, problemError,
} from './errors.js';
