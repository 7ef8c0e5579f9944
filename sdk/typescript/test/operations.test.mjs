// Every operation of the server's OpenAPI document is a Client method,
// named by its operationId.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Client } from '../src/index.js';

test('every OpenAPI operation has a Client method', () => {
  const spec = JSON.parse(readFileSync(new URL('../../../server/openapi.json', import.meta.url), 'utf8'));
  const ids = [];
  for (const ops of Object.values(spec.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (['get', 'post', 'put', 'patch', 'delete'].includes(method)) ids.push(op.operationId);
    }
  }
  assert.ok(ids.length > 100, `read ${ids.length} operations`);
  const c = new Client({ addr: 'http://127.0.0.1:1' });
  const missing = ids.filter((id) => typeof c[id] !== 'function');
  assert.deepEqual(missing, [], 'operations without a Client method');
});
