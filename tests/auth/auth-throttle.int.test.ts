// Issue 20, finding 8: wrong-key floods. Each failed authentication of a source address takes a token from its
// bucket (10, refilled 1/s), is counted in /metrics (ndif_api_auth_failures_total{reason}) and logged; once the
// bucket is empty the source's calls are refused with 429 API_AUTH_THROTTLED before any key is checked. Another
// address is not affected, and the bucket refills with time.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startApi, type ApiHarness } from '../command-api/harness.js';

let h: ApiHarness;
let user: string;
before(async () => {
  h = await startApi({ auth: true, metrics: true });
  user = await h.newKey('alice');
});
after(() => h.close());

const guess = (i: number) => `ndif_${'f'.repeat(16)}_${String(i).padStart(43, 'A')}`;
const metric = async (reason: string): Promise<number> => {
  const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
  const m = new RegExp(`^ndif_api_auth_failures_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
};

describe('wrong-key floods', () => {
  it('200 guesses from one address: 10 are checked (403), the rest refused unchecked (429), all counted and logged', async () => {
    const codes = new Map<string, number>();
    for (let i = 0; i < 200; i++) {
      const r = await h.app.inject({
        method: 'GET',
        url: '/whoami',
        headers: { authorization: `Bearer ${guess(i)}` },
        remoteAddress: '203.0.113.7',
      });
      const code = `${r.statusCode} ${r.json().code}`;
      codes.set(code, (codes.get(code) ?? 0) + 1);
      if (r.statusCode === 429) assert.ok(Number(r.headers['retry-after']) >= 1, 'Retry-After is set');
    }
    assert.deepEqual(Object.fromEntries(codes), { '403 AUTH_KEY_UNKNOWN': 10, '429 API_AUTH_THROTTLED': 190 });
    assert.equal(await metric('AUTH_KEY_UNKNOWN'), 10);
    assert.equal(await metric('THROTTLED'), 190);
    const lines = h.logs.filter((l) => l.source === '203.0.113.7' && l.code === 'AUTH_KEY_UNKNOWN');
    assert.equal(lines.length, 10);
    assert.equal(lines.at(-1)!.throttled, true);

    // Even the right key is refused from that address while it is throttled; another address is served.
    const same = await h.app.inject({
      method: 'GET',
      url: '/whoami',
      headers: { authorization: `Bearer ${user}` },
      remoteAddress: '203.0.113.7',
    });
    assert.equal(same.statusCode, 429);
    const other = await h.app.inject({
      method: 'GET',
      url: '/whoami',
      headers: { authorization: `Bearer ${user}` },
      remoteAddress: '198.51.100.2',
    });
    assert.equal(other.statusCode, 200, other.body);

    // Two seconds later two more guesses are checked, then it is refused again.
    h.clock.now += 2000;
    const after2s = [];
    for (let i = 0; i < 3; i++) {
      const r = await h.app.inject({
        method: 'GET',
        url: '/whoami',
        headers: { authorization: `Bearer ${guess(1000 + i)}` },
        remoteAddress: '203.0.113.7',
      });
      after2s.push(r.statusCode);
    }
    assert.deepEqual(after2s, [403, 403, 429]);
  });

  it('calls without a key count as failures too', async () => {
    const statuses = [];
    for (let i = 0; i < 12; i++) {
      const r = await h.app.inject({ method: 'GET', url: '/whoami', remoteAddress: '192.0.2.99' });
      statuses.push(r.statusCode);
    }
    assert.deepEqual(statuses, [...Array(10).fill(401), 429, 429]);
    assert.ok((await metric('AUTH_KEY_MISSING')) >= 10);
  });
});
