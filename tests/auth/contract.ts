// The API key store contract every adapter passes.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ApiKeyStore, StoredApiKey } from '../../auth/port.js';

const key = (id: string, over: Partial<StoredApiKey> = {}): StoredApiKey => ({
  id,
  hash: 'ab'.repeat(32),
  label: `label ${id}`,
  tags: { trusted: true, priority: false, operator: id.endsWith('1') },
  createdAt: `2025-03-01T10:00:0${id.slice(-1)}.000Z`,
  createdBy: 'key:boss',
  revokedAt: null,
  revokedBy: null,
  ...over,
});

export function apiKeyStoreContract(open: () => Promise<ApiKeyStore>): void {
  it('inserts, gets, lists in creation order', async () => {
    const s = await open();
    try {
      await s.insert(key('0000000000000002'));
      await s.insert(key('0000000000000001'));
      assert.deepEqual(await s.get('0000000000000001'), key('0000000000000001'));
      assert.equal(await s.get('00000000000000ff'), undefined);
      assert.deepEqual(
        (await s.list()).map((k) => k.id),
        ['0000000000000001', '0000000000000002'],
      );
    } finally {
      await s.close();
    }
  });

  it("keeps a key's limit tags; a key without them reads without", async () => {
    const s = await open();
    try {
      const limited = key('0000000000000005', {
        tags: { trusted: false, priority: false, operator: false, limits: { maxQueued: 3, maxTimeoutMs: 60_000 } },
      });
      await s.insert(limited);
      assert.deepEqual(await s.get('0000000000000005'), limited);
      await s.insert(key('0000000000000006'));
      assert.equal((await s.get('0000000000000006'))!.tags.limits, undefined);
    } finally {
      await s.close();
    }
  });

  it('refuses a second key with the same id', async () => {
    const s = await open();
    try {
      await s.insert(key('0000000000000003'));
      await assert.rejects(s.insert(key('0000000000000003', { label: 'again' })));
      assert.equal((await s.get('0000000000000003'))!.label, 'label 0000000000000003');
    } finally {
      await s.close();
    }
  });

  it('revokes once: a second revoke keeps the first time and actor', async () => {
    const s = await open();
    try {
      await s.insert(key('0000000000000004'));
      const r = await s.revoke('0000000000000004', '2025-03-02T00:00:00.000Z', 'key:a');
      assert.equal(r!.revokedAt, '2025-03-02T00:00:00.000Z');
      const again = await s.revoke('0000000000000004', '2025-03-03T00:00:00.000Z', 'key:b');
      assert.equal(again!.revokedAt, '2025-03-02T00:00:00.000Z');
      assert.equal(again!.revokedBy, 'key:a');
      assert.equal(await s.revoke('00000000000000aa', '2025-03-03T00:00:00.000Z', 'key:b'), undefined);
    } finally {
      await s.close();
    }
  });

  it('fails once closed (what makes the API answer 503)', async () => {
    const s = await open();
    await s.ping();
    await s.close();
    await assert.rejects(s.get('0000000000000001'));
    await assert.rejects(s.ping());
  });
}
