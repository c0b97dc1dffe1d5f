// The SQLite API key store passes the contract (a file in a temp folder); keys survive reopening the file.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { apiKeyStoreContract } from './contract.js';

const dir = mkdtempSync(join(tmpdir(), 'ndif-keys-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

describe('SqliteApiKeyStore contract', () =>
  apiKeyStoreContract(async () => new SqliteApiKeyStore({ path: join(dir, `k${++n}.sqlite`) })));

it('a key created through ApiKeys authenticates after the file is reopened; only its hash is stored', async () => {
  const path = join(dir, 'reopen.sqlite');
  const first = new SqliteApiKeyStore({ path });
  const { key, summary } = await new ApiKeys(first).create(
    { label: 'alice', tags: { trusted: true, priority: true, operator: false } },
    'key:boss',
    '2025-03-01T10:00:00.000Z',
  );
  const rows = first.db.prepare('SELECT * FROM api_keys').all() as Array<Record<string, unknown>>;
  assert.equal(rows.length, 1);
  assert.ok(!JSON.stringify(rows).includes(key.slice(22)), 'the secret is not stored');
  await first.close();
  const second = new SqliteApiKeyStore({ path });
  const me = await new ApiKeys(second).authenticate(key);
  assert.deepEqual(me, {
    actor: `key:${summary.id}`,
    keyId: summary.id,
    label: 'alice',
    tags: { trusted: true, priority: true, operator: false },
    auth: true,
  });
  await second.close();
});

it('a bootstrap key given as text becomes an operator key once; another secret under its id is refused', async () => {
  const store = new SqliteApiKeyStore({ path: join(dir, 'bootstrap.sqlite') });
  const keys = new ApiKeys(store);
  const text = `ndif_${'0123456789abcdef'}_${'S'.repeat(43)}`;
  const first = await keys.ensureBootstrapKey(text, '2025-03-01T10:00:00.000Z');
  const again = await keys.ensureBootstrapKey(text, '2025-03-02T10:00:00.000Z');
  assert.deepEqual(again, first);
  assert.equal((await store.list()).length, 1);
  const me = await keys.authenticate(text);
  assert.deepEqual(me.tags, { trusted: true, priority: false, operator: true });
  await assert.rejects(
    keys.ensureBootstrapKey(`ndif_${'0123456789abcdef'}_${'T'.repeat(43)}`, '2025-03-02T10:00:00.000Z'),
    /taken by another key/,
  );
  await assert.rejects(
    keys.ensureBootstrapKey('nope', '2025-03-02T10:00:00.000Z'),
    (e: { code?: string }) => e.code === 'AUTH_KEY_MALFORMED',
  );
  await store.close();
});

it('a keys file written before limit tags existed opens with the column added; its keys read without limits', async () => {
  const path = join(dir, 'before-limits.sqlite');
  const Database = (await import('better-sqlite3')).default;
  const old = new Database(path);
  old.exec(`CREATE TABLE api_keys (id TEXT PRIMARY KEY, hash TEXT NOT NULL, label TEXT NOT NULL, trusted INTEGER NOT NULL, priority INTEGER NOT NULL, operator INTEGER NOT NULL,
    created_at TEXT NOT NULL, created_by TEXT NOT NULL, revoked_at TEXT, revoked_by TEXT)`);
  old
    .prepare('INSERT INTO api_keys VALUES (?, ?, ?, 1, 0, 0, ?, ?, NULL, NULL)')
    .run('00000000000000aa', 'ab'.repeat(32), 'old', '2025-03-01T10:00:00.000Z', 'key:boss');
  old.close();
  const store = new SqliteApiKeyStore({ path });
  assert.deepEqual((await store.get('00000000000000aa'))!.tags, { trusted: true, priority: false, operator: false });
  await store.insert({
    id: '00000000000000bb',
    hash: 'cd'.repeat(32),
    label: 'new',
    tags: { trusted: false, priority: false, operator: false, limits: { maxRunning: 2 } },
    createdAt: '2025-03-02T10:00:00.000Z',
    createdBy: 'key:boss',
    revokedAt: null,
    revokedBy: null,
  });
  assert.deepEqual((await store.get('00000000000000bb'))!.tags.limits, { maxRunning: 2 });
  await store.close();
});
