// Compiled by `npm run typecheck` (tsc --noEmit, strict), never run: the
// declarations in src/*.d.ts describe the API a TypeScript user calls, and
// the uses below must type-check. Lines marked @ts-expect-error must not.
import { Client, Worker, NonRetryableError, HephError, NotFoundError, RunFailedError, OPERATIONS } from '../src/index.js';
import type { Run, Task, OperationId } from '../src/index.js';

export async function clientUses(c: Client): Promise<void> {
  const run: Run = await c.start('example.order', { id: 'o-1' }, { idempotencyKey: 'k', businessKey: 'o-1', tags: ['t'] });
  await c.start('example.onboarding', {}, { kind: 'workflow', workflowId: 'w-1', signal: { name: 'activate', payload: { by: 'ts' } } });
  await c.start('example.order', {}, { abortSignal: new AbortController().signal, timeoutMs: 5000 });
  // @ts-expect-error: the kind is one of flow, document, workflow, job
  await c.start('x', {}, { kind: 'nonsense' });
  const status: string = (await c.get(run.id)).status;
  const out = await c.result<{ ship_order: { tracking: string } }>(run.id, { timeoutMs: 1000 });
  const tracking: string = out.ship_order.tracking;
  const whole: Run = await c.result(run.id, { run: true });
  for await (const r of c.list({ status: 'completed' })) void r.id;
  const h = await c.history(run.id, { after: 0 });
  const seqs: number[] = h.events.map((e) => e.seq);
  await c.signal(run.id, 'activate', { by: 'ts' }, { id: 's-1' });
  await c.update(run.id, 'change_plan', 'team', { waitFor: 'completed' });
  await c.query(run.id, 'status');
  await c.approve(run.id, 'gate', { comment: 'ok' });
  await c.cancel(run.id, { reason: 'r' });
  await c.sendEvent('order.paid', { id: 1 }, { id: 'e-1' });
  // Every operation by its operationId, typed by the OpenAPI document.
  const me = await c.whoami();
  const role: string | undefined = me.role;
  await c.runLogs({ path: { id: run.id } });
  // @ts-expect-error: getRun needs its path parameter
  await c.getRun({ path: {} });
  const ids: OperationId[] = Object.keys(OPERATIONS) as OperationId[];
  void [status, tracking, whole, seqs, role, ids];
  try {
    await c.get('nope');
  } catch (err) {
    if (err instanceof NotFoundError) void err.status;
    else if (err instanceof RunFailedError) void err.run;
    else if (err instanceof HephError) void err.detail;
  }
}

export function workerUses(): Worker {
  const w = new Worker({ addr: 'http://127.0.0.1:7070', token: 't', maxTasks: 2, queues: ['default'] })
    .action<{ amount: number }, { ok: boolean }>('charge', async (task: Task, args) => {
      task.info('charging', { amount: args.amount });
      await task.heartbeat({ progress: 1 });
      if (task.signal.aborted) throw new NonRetryableError('stopped');
      return { ok: true };
    })
    // @ts-expect-error: the handler's output type is checked
    .step<number, string>('example.resize', async (_task, size) => size * 2)
    .activity('send', (task) => task.runId);
  w.handleSignals({ graceMs: 1000 });
  return w;
}
