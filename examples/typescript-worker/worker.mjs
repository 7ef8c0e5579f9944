// The example TypeScript worker: it runs the remote steps of
// example.thumbnails (app/demo/remote.go), a Go flow whose steps only HTTP
// workers run, on the TypeScript SDK (sdk/typescript).
//
//   npm install                       # links ../../sdk/typescript
//   HEPH_ADDR=http://127.0.0.1:7070 HEPH_TOKEN=<worker token> node worker.mjs
//
// and, with another token that may start runs:
//
//   heph start example.thumbnails --input '{"url": "https://example.com/cat.png", "sizes": [64, 128]}' --wait
//
// With --start it also starts one run, with the token in HEPH_CLIENT_TOKEN
// (one that may start runs: role operator), prints its output as JSON and
// stops.
import { Client, Worker, NonRetryableError } from '@hephaestus-go/sdk';

const addr = process.env.HEPH_ADDR || 'http://127.0.0.1:7070';
const token = process.env.HEPH_TOKEN;

export function thumbnailWorker(opts) {
  return new Worker({ addr, token, maxTasks: 4, ...opts })
    // Step fetch: the flow's input arrives as {input: {url, sizes}}.
    .step('example.fetch_image', async (task, { input }) => {
      if (!/^https?:\/\//.test(input?.url ?? '')) {
        throw new NonRetryableError(`fetch: url ${JSON.stringify(input?.url)} is not an http(s) URL`);
      }
      task.info('fetched the image', { url: input.url });
      return { url: input.url, bytes: 1024 };
    })
    // Map step resize: one task per element of the input's sizes.
    .step('example.resize', async (task, size) => {
      if (!Number.isInteger(size) || size <= 0) {
        throw new NonRetryableError(`resize: size ${JSON.stringify(size)} is not a positive integer`);
      }
      task.info('resized', { size, attempt: task.attempt });
      return { size, thumbnail: `thumb-${size}.png` };
    });
}

const w = thumbnailWorker();
if (process.argv.includes('--start')) {
  const running = w.run();
  const c = new Client({ addr, token: process.env.HEPH_CLIENT_TOKEN || token });
  const run = await c.start('example.thumbnails', { url: 'https://example.com/cat.png', sizes: [64, 128, 256] }, {
    idempotencyKey: process.env.RUN_KEY,
  });
  const out = await c.result(run.id);
  process.stdout.write(JSON.stringify({ run: run.id, output: out }) + '\n');
  await w.stop({ graceMs: 10_000 });
  await running;
} else {
  w.handleSignals({ graceMs: 30_000 });
  await w.run();
}
