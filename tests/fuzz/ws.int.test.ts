// Bad-input fuzzing of the status websocket over a real socket, seeded: 3,000 frames, 10,500 with NDIF_FUZZ=long
// (tests/fuzz/runs.ts): valid messages with fuzzed fields, wrong types, unknown fields, bad ids and cursors, broken
// JSON, non-objects, binary frames, frames over the 64 KiB limit, invalid UTF-8, in lockstep — each frame followed by a ping, everything before the pong is its
// answer. A message the protocol does not accept gets WS_BAD_MESSAGE (a bad cursor WS_BAD_CURSOR) and the socket
// stays usable; an accepted one gets its answer and never WS_BAD_MESSAGE; a frame over the limit or not UTF-8
// closes the socket with 1009 / 1007. Then 300 upgrades with fuzzed keys and protocol versions. Nothing is logged as
// an error, the log head never moves, and the server still answers afterwards.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import WebSocket from 'ws';
import { startApiFabric, type ApiFabric } from './api-fabric.js';
import { fuzzRuns, share } from './runs.js';

const SEED = 20_251_205;
const LONG_FRAMES = 10_500;
const FRAMES = fuzzRuns(3_000, LONG_FRAMES);
const UPGRADES = 300;

let f: ApiFabric;
let url: string;

before(async () => {
  f = await startApiFabric();
  const r = await f.app.inject({
    method: 'POST',
    url: '/requests',
    headers: { authorization: `Bearer ${f.keys.operator}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ requestId: 'seed-1', model: 'gpt2-tiny', invokes: [{ input: 'hello' }] }),
  });
  assert.equal(r.statusCode, 202, r.body);
  url = (await f.app.listen({ host: '127.0.0.1', port: 0 })).replace(/^http/, 'ws');
});
after(async () => {
  await f?.close();
});

type Expect =
  | 'pong'
  | 'watching'
  | 'unsubscribed'
  | 'subscribed'
  | 'subscribed-or-bad-cursor'
  | 'bad'
  | 'close-1009'
  | 'close-1007';

interface Frame {
  data: string | Buffer;
  binary: boolean;
  expect: Expect;
}

const validId = fc.oneof(
  fc.constantFrom('seed-1', 'r-01', 'nope'),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,30}$/),
);
const badId = fc.oneof(
  fc.constantFrom('', '-x', '.x', 'a b', 'a/b', 'x'.repeat(161), 'é'),
  fc.string({ maxLength: 10 }).filter((s) => !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,159}$/.test(s)),
);
const anyJson = fc.jsonValue({ maxDepth: 3 });
const text = fc.string({ unit: 'binary', maxLength: 40 });
const j = (v: unknown) => JSON.stringify(v);

const frame: fc.Arbitrary<Frame> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<Frame>({ data: j({ type: 'ping' }), binary: false, expect: 'pong' }) },
  {
    weight: 1,
    arbitrary: fc.constant<Frame>({ data: j({ type: 'watch', topic: 'cluster' }), binary: false, expect: 'watching' }),
  },
  {
    weight: 2,
    arbitrary: validId.map(
      (requestId): Frame => ({ data: j({ type: 'unsubscribe', requestId }), binary: false, expect: 'unsubscribed' }),
    ),
  },
  {
    weight: 3,
    arbitrary: validId.map(
      (requestId): Frame => ({ data: j({ type: 'subscribe', requestId }), binary: false, expect: 'subscribed' }),
    ),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(validId, fc.constantFrom('inline', 'binary', undefined), fc.constantFrom('all', 'final', undefined))
      .map(
        ([requestId, results, statuses]): Frame => ({
          data: j({ type: 'subscribe', requestId, results, statuses }),
          binary: false,
          expect: 'subscribed',
        }),
      ),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        validId,
        fc.oneof(
          fc.string({ maxLength: 64 }),
          fc.integer(),
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.constantFrom('0', '1', '1:x', '99999999999', '-1', '1.5', '3:0:0'),
        ),
      )
      .map(
        ([requestId, since]): Frame => ({
          data: j({ type: 'subscribe', requestId, since }),
          binary: false,
          expect: 'subscribed-or-bad-cursor',
        }),
      ),
  },
  {
    weight: 12,
    arbitrary: fc
      .oneof(
        badId.map((requestId) => j({ type: 'subscribe', requestId })),
        badId.map((requestId) => j({ type: 'unsubscribe', requestId })),
        fc.tuple(validId, anyJson).map(([requestId, extra]) => j({ type: 'subscribe', requestId, extra })),
        fc
          .tuple(
            validId,
            anyJson.filter((v) => v !== 'inline' && v !== 'binary'),
          )
          .map(([requestId, results]) => j({ type: 'subscribe', requestId, results })),
        fc
          .tuple(
            validId,
            anyJson.filter((v) => v !== 'all' && v !== 'final'),
          )
          .map(([requestId, statuses]) => j({ type: 'subscribe', requestId, statuses })),
        fc
          .tuple(
            validId,
            fc.oneof(
              fc.string({ minLength: 65, maxLength: 80 }),
              fc.constant(null),
              fc.boolean(),
              fc.array(fc.integer()),
              fc.object(),
            ),
          )
          .map(([requestId, since]) => j({ type: 'subscribe', requestId, since })),
        fc
          .oneof(text, anyJson)
          .filter((t) => t !== 'cluster')
          .map((topic) => j({ type: 'watch', topic })),
        fc
          .oneof(text, fc.integer(), fc.constant(null))
          .filter((t) => !['ping', 'watch', 'subscribe', 'unsubscribe'].includes(String(t)))
          .map((type) => j({ type })),
        anyJson.map(j).filter((s) => !/"type"/.test(s)),
        fc.constantFrom(
          '',
          ' ',
          '{',
          '}',
          '[',
          'null',
          'true',
          '1',
          '"ping"',
          '{"type":"ping"',
          '{"type":"ping"}}',
          '\uFEFF{"type":"ping"}',
          '{"type":"ping","type":"subscribe"}',
          '{"__proto__":{"type":"ping"}}',
          `${'['.repeat(3000)}${']'.repeat(3000)}`,
        ),
        text,
        fc.constant(j({ type: 'ping', x: 'y'.repeat(60_000) })),
        fc.constant(j({ type: 'subscribe' })),
        fc.constant(j({ type: 'ping', extra: 1 })),
      )
      .map((data): Frame => ({ data, binary: false, expect: 'bad' })),
  },
  {
    weight: 2,
    arbitrary: fc
      .oneof(fc.uint8Array({ maxLength: 64 }), fc.constant(new TextEncoder().encode(j({ type: 'ping' }))))
      .map((b): Frame => ({ data: Buffer.from(b), binary: true, expect: 'bad' })),
  },
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 64 * 1024 + 1, max: 80 * 1024 })
      .map((n): Frame => ({ data: 'x'.repeat(n), binary: false, expect: 'close-1009' })),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), Buffer.from([0xc3, 0x28]), Buffer.from([0xed, 0xa0, 0x80]))
      .map((b): Frame => ({ data: b, binary: false, expect: 'close-1007' })),
  },
);

/** A socket whose messages are read in lockstep: send a frame, then a ping; everything before the pong is the answer. */
class Lockstep {
  private readonly inbox: Array<Record<string, unknown>> = [];
  private waiting: (() => void) | undefined;
  closed: { code: number } | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      this.inbox.push(JSON.parse(String(d)) as Record<string, unknown>);
      this.waiting?.();
    });
    ws.on('close', (code) => {
      this.closed = { code };
      this.waiting?.();
    });
    ws.on('error', () => undefined);
  }

  static async open(headers: Record<string, string>): Promise<Lockstep> {
    const ws = new WebSocket(`${url}/ws`, { headers });
    const s = new Lockstep(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    });
    await s.next((m) => m.type === 'hello');
    return s;
  }

  /** Waits for a message passing `test`; returns the messages received before it (and it), or undefined when the socket closed. */
  async next(
    test: (m: Record<string, unknown>) => boolean,
    timeoutMs = 5000,
  ): Promise<Array<Record<string, unknown>> | undefined> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const i = this.inbox.findIndex(test);
      if (i >= 0) return this.inbox.splice(0, i + 1);
      if (this.closed) return undefined;
      if (Date.now() > end)
        throw new Error(`no answer within ${timeoutMs} ms; got ${JSON.stringify(this.inbox).slice(0, 500)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiting = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.waiting = undefined;
    }
  }

  send(f: Frame): void {
    this.ws.send(f.data, { binary: f.binary });
  }

  close(): void {
    this.ws.terminate();
  }
}

describe('websocket fuzz', () => {
  it(`${FRAMES} seeded frames in lockstep: refused with WS_BAD_MESSAGE and still open, or answered; oversize and bad UTF-8 close`, async (t) => {
    const started = Date.now();
    const headers = { authorization: `Bearer ${f.keys.operator}` };
    let s = await Lockstep.open(headers);
    const tally = new Map<string, number>();
    const headBefore = await f.head();
    await fc.assert(
      fc.asyncProperty(frame, async (fr) => {
        s.send(fr);
        if (fr.expect === 'close-1009' || fr.expect === 'close-1007') {
          const got = await s.next(() => false).catch(() => undefined);
          assert.equal(got, undefined, 'the socket closed');
          assert.equal(s.closed?.code, fr.expect === 'close-1009' ? 1009 : 1007);
          tally.set(fr.expect, (tally.get(fr.expect) ?? 0) + 1);
          s = await Lockstep.open(headers);
          return;
        }
        s.send({ data: JSON.stringify({ type: 'ping' }), binary: false, expect: 'pong' });
        let answer = await s.next((m) => m.type === 'pong');
        assert.ok(answer !== undefined, `the socket closed after ${String(fr.data).slice(0, 100)} (${s.closed?.code})`);
        if (fr.expect === 'pong') {
          const second = await s.next((m) => m.type === 'pong');
          assert.ok(second !== undefined);
          answer = [...answer, ...second];
        }
        // Status messages of earlier subscriptions arrive whenever their replay is read: not part of this answer.
        const mine = answer.filter((m) => !['status', 'ended', 'changed'].includes(String(m.type)));
        const errors = mine.filter((m) => m.type === 'error');
        const what = `${String(fr.data).slice(0, 160)} → ${JSON.stringify(mine).slice(0, 400)}`;
        assert.ok(!errors.some((e) => e.code === 'API_INTERNAL'), what);
        if (fr.expect === 'bad') {
          assert.deepEqual(
            errors.map((e) => e.code),
            ['WS_BAD_MESSAGE'],
            what,
          );
        } else {
          assert.ok(!errors.some((e) => e.code === 'WS_BAD_MESSAGE'), what);
          const types = mine.map((m) => m.type);
          if (fr.expect === 'subscribed-or-bad-cursor')
            assert.ok(types.includes('subscribed') || errors.some((e) => e.code === 'WS_BAD_CURSOR'), what);
          else if (fr.expect === 'subscribed')
            assert.ok(types.includes('subscribed') || errors.some((e) => e.code === 'WS_TOO_MANY_SUBSCRIPTIONS'), what);
          else assert.ok(types.includes(fr.expect), what);
        }
        tally.set(fr.expect, (tally.get(fr.expect) ?? 0) + 1);
      }),
      { seed: SEED, numRuns: FRAMES, endOnFailure: true },
    );
    s.close();
    assert.equal(await f.head(), headBefore, 'the websocket changed nothing in the log');
    assert.deepEqual(f.errors, [], 'nothing was logged as an error');
    t.diagnostic(`${FRAMES} frames in ${Date.now() - started} ms: ${JSON.stringify(Object.fromEntries(tally))}`);
    assert.ok(
      (tally.get('bad') ?? 0) > share(3000, LONG_FRAMES, FRAMES) &&
        (tally.get('close-1009') ?? 0) > share(10, LONG_FRAMES, FRAMES) &&
        (tally.get('subscribed') ?? 0) > share(500, LONG_FRAMES, FRAMES),
    );
  });

  it(`${UPGRADES} upgrades with fuzzed keys and protocol versions: a hello, or the HTTP refusal with a code`, async () => {
    const key = fc.oneof(
      fc.constant(f.keys.operator),
      fc.constant(f.keys.user),
      fc.constant(''),
      fc.string({ maxLength: 70 }),
      fc.constant(`ndif_${'0'.repeat(16)}_${'A'.repeat(43)}`),
    );
    const protocol = fc.oneof(fc.constantFrom('1.0', '1.3', '2.0', 'x', '', '1'), fc.string({ maxLength: 10 }));
    await fc.assert(
      fc.asyncProperty(
        fc.record({ key: fc.option(key), protocol: fc.option(protocol), inHeader: fc.boolean() }),
        async (u) => {
          const params = new URLSearchParams();
          const headers: Record<string, string> = {};
          if (u.key !== null) {
            if (u.inHeader) headers.authorization = `Bearer ${u.key.replace(/[^\x20-\x7e]/g, '')}`;
            else params.set('key', u.key);
          }
          if (u.protocol !== null) params.set('protocol', u.protocol);
          const qs = params.toString();
          const ws = new WebSocket(`${url}/ws${qs ? `?${qs}` : ''}`, { headers });
          const outcome = await new Promise<{
            hello?: Record<string, unknown>;
            status?: number;
            body?: Record<string, unknown>;
          }>((resolve, reject) => {
            ws.once('message', (d) => resolve({ hello: JSON.parse(String(d)) as Record<string, unknown> }));
            ws.once('unexpected-response', (_req, res) => {
              let text = '';
              res.on('data', (c: Buffer) => (text += String(c)));
              res.on('end', () =>
                resolve({ status: res.statusCode, body: JSON.parse(text) as Record<string, unknown> }),
              );
            });
            ws.once('error', (e) => reject(e));
          });
          ws.terminate();
          if (outcome.hello) assert.equal(outcome.hello.type, 'hello');
          else {
            assert.ok(outcome.status! >= 400 && outcome.status! < 500, JSON.stringify(outcome));
            assert.equal(typeof outcome.body?.code, 'string');
          }
        },
      ),
      { seed: SEED + 1, numRuns: UPGRADES, endOnFailure: true },
    );
    const ok = await Lockstep.open({ authorization: `Bearer ${f.keys.operator}` });
    ok.send({ data: JSON.stringify({ type: 'ping' }), binary: false, expect: 'pong' });
    assert.ok(await ok.next((m) => m.type === 'pong'));
    // After all that, a subscription still works as documented: `subscribed` first, then the replayed history.
    ok.send({ data: JSON.stringify({ type: 'subscribe', requestId: 'seed-1' }), binary: false, expect: 'subscribed' });
    const got = await ok.next((m) => m.type === 'status' && m.status === 'PROVISIONING');
    assert.deepEqual(
      got?.map((m) => (m.type === 'status' ? m.status : m.type)),
      ['subscribed', 'RECEIVED', 'PROVISIONING'],
    );
    ok.close();
  });
});
