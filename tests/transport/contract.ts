// The contract every Transport adapter passes: per-key order, consumer groups, committed offsets
// across a restarting subscriber, at-least-once with in-place retry, batch delivery, input checks.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  partitionFor,
  withDuplicateDelivery,
  type OutgoingMessage,
  type Transport,
  type TransportMessage,
} from '../../transport/index.js';
import { until } from '../support/until.js';

export interface ContractHarness {
  /** A new client of the same broker (another process, in distributed mode). */
  open(): Promise<Transport>;
  partitions: number;
  /** Called once after the suite. */
  dispose?(): Promise<void>;
}

const unique = (what: string) => `${what}-${randomUUID().slice(0, 8)}`;
const msg = (key: string, value: string, headers?: Record<string, string>): OutgoingMessage =>
  headers ? { key, value: Buffer.from(value), headers } : { key, value: Buffer.from(value) };
const text = (m: TransportMessage) => m.value.toString('utf8');

export function transportContract(name: string, makeHarness: () => Promise<ContractHarness>): void {
  describe(`Transport contract: ${name}`, () => {
    let h: ContractHarness;
    let t: Transport;
    const opened: Transport[] = [];
    const open = async () => {
      const x = await h.open();
      opened.push(x);
      return x;
    };

    before(async () => {
      h = await makeHarness();
      t = await open();
    });
    after(async () => {
      await Promise.all(opened.map((x) => x.close()));
      await h.dispose?.();
    });

    it("delivers key, value, headers and timestamp, in publish order per key, in the key's partition", async () => {
      const topic = unique('order');
      const keys = Array.from({ length: 8 }, (_, i) => `agent-${i}`);
      const t0 = Date.now();
      for (let round = 0; round < 5; round++) {
        await t.publish(
          topic,
          keys.map((k) => msg(k, `${k}:${round}`, { round: String(round), kind: 'test' })),
        );
      }
      await t.publish(
        topic,
        keys.flatMap((k) => Array.from({ length: 20 }, (_, i) => msg(k, `${k}:${5 + i}`))),
      );
      const got: TransportMessage[] = [];
      const sub = await t.subscribe(topic, unique('g'), async (m) => void got.push(m), { fromBeginning: true });
      await until('200 messages', () => got.length >= 200);
      await sub.close();
      assert.equal(got.length, 200);
      for (const k of keys) {
        const seq = got.filter((m) => m.key === k).map((m) => Number(text(m).split(':')[1]));
        assert.deepEqual(
          seq,
          Array.from({ length: 25 }, (_, i) => i),
          `order of ${k}`,
        );
      }
      const first = got.find((m) => text(m) === 'agent-3:2')!;
      assert.deepEqual(first.headers, { round: '2', kind: 'test' });
      assert.equal(first.topic, topic);
      assert.ok(first.timestamp >= t0 - 1000 && first.timestamp <= Date.now() + 1000, 'timestamp is the publish time');
      for (const m of got) assert.equal(m.partition, partitionFor(m.key, h.partitions), `partition of ${m.key}`);
      const offsets = got.filter((m) => m.key === 'agent-0').map((m) => BigInt(m.offset));
      assert.ok(
        offsets.every((o, i) => i === 0 || o > offsets[i - 1]),
        'offsets grow within a partition',
      );
    });

    it('starts a new group without fromBeginning after the messages already published', async () => {
      const topic = unique('latest');
      await t.publish(topic, msg('k', 'before'));
      const got: string[] = [];
      const sub = await t.subscribe(topic, unique('g'), async (m) => void got.push(text(m)));
      await t.publish(topic, msg('k', 'after'));
      await until('the message published after subscribing', () => got.length >= 1);
      await sub.close();
      assert.deepEqual(got, ['after']); // same key: "before" would have come first
    });

    it('shares the partitions between the members of one group, each message to one member', async () => {
      const topic = unique('share');
      const group = unique('g');
      const a: string[] = [];
      const b: string[] = [];
      const other = await open();
      const subA = await t.subscribe(topic, group, async (m) => void a.push(text(m)), { fromBeginning: true });
      const subB = await other.subscribe(topic, group, async (m) => void b.push(text(m)), { fromBeginning: true });
      const all = Array.from({ length: 64 }, (_, i) => msg(`request-${i % 16}`, `m${i}`));
      await t.publish(topic, all);
      await until('64 messages across both members', () => a.length + b.length >= 64);
      await sleep(300); // a second delivery would show up here
      await Promise.all([subA.close(), subB.close()]);
      assert.equal(a.length + b.length, 64);
      assert.equal(new Set([...a, ...b]).size, 64, 'no message went to both members');
      assert.ok(a.length > 0 && b.length > 0, `both members got messages (${a.length}/${b.length})`);
    });

    it('keeps every message and the order per key when a member joins while messages flow', async () => {
      const topic = unique('rebalance');
      const group = unique('g');
      const seenA: string[] = [];
      const seenB: string[] = [];
      const handler = (seen: string[]) => async (m: TransportMessage) => {
        seen.push(text(m));
        await sleep(1);
      };
      const subA = await t.subscribe(topic, group, handler(seenA), { fromBeginning: true });
      const keys = Array.from({ length: 8 }, (_, i) => `agent-${i}`);
      const publishing = (async () => {
        for (let round = 0; round < 30; round++) {
          await t.publish(
            topic,
            keys.map((k) => msg(k, `${k}:${round}`)),
          );
          await sleep(5);
        }
      })();
      await sleep(50);
      const other = await open();
      const subB = await other.subscribe(topic, group, handler(seenB), { fromBeginning: true });
      await publishing;
      await until('every message at least once', () => new Set([...seenA, ...seenB]).size >= 240, 30_000);
      await Promise.all([subA.close(), subB.close()]);
      for (const seen of [seenA, seenB]) {
        for (const k of keys) {
          const rounds = seen.filter((v) => v.startsWith(`${k}:`)).map((v) => Number(v.split(':')[1]));
          // a redelivered range starts again lower, but never skips ahead
          rounds.forEach((r, i) => {
            if (i > 0) assert.ok(r <= rounds[i - 1] + 1, `${k} jumped from ${rounds[i - 1]} to ${r}`);
          });
        }
      }
    });

    it('gives every group every message', async () => {
      const topic = unique('groups');
      const x: string[] = [];
      const y: string[] = [];
      const subX = await t.subscribe(topic, unique('gx'), async (m) => void x.push(text(m)), { fromBeginning: true });
      const subY = await t.subscribe(topic, unique('gy'), async (m) => void y.push(text(m)), { fromBeginning: true });
      await t.publish(
        topic,
        Array.from({ length: 10 }, (_, i) => msg(`k${i}`, `v${i}`)),
      );
      await until('10 messages in each group', () => x.length >= 10 && y.length >= 10);
      await Promise.all([subX.close(), subY.close()]);
      assert.deepEqual([...x].sort(), [...y].sort());
    });

    it('resumes a group after the last message it handled when a subscriber closes and subscribes again', async () => {
      const topic = unique('resume');
      const group = unique('g');
      await t.publish(
        topic,
        Array.from({ length: 10 }, (_, i) => msg('agent-1', `old${i}`)),
      );
      const first: string[] = [];
      const sub1 = await t.subscribe(topic, group, async (m) => void first.push(text(m)), { fromBeginning: true });
      await until('the first 10', () => first.length >= 10);
      await sub1.close();
      await t.publish(
        topic,
        Array.from({ length: 5 }, (_, i) => msg('agent-1', `new${i}`)),
      );
      const second: string[] = [];
      const again = await open(); // a restarted process: a new client, the same group
      const sub2 = await again.subscribe(topic, group, async (m) => void second.push(text(m)), { fromBeginning: true });
      await until('the 5 new ones', () => second.length >= 5);
      await sleep(200);
      await sub2.close();
      assert.deepEqual(
        first,
        Array.from({ length: 10 }, (_, i) => `old${i}`),
      );
      assert.deepEqual(
        second,
        Array.from({ length: 5 }, (_, i) => `new${i}`),
      );
    });

    it('retries a failing handler with the same message while later messages of its partition wait', async () => {
      const topic = unique('retry');
      const seen: string[] = [];
      const errors: string[] = [];
      let failures = 0;
      const sub = await t.subscribe(
        topic,
        unique('g'),
        async (m) => {
          seen.push(text(m));
          if (text(m) === 'm2' && failures < 2) {
            failures++;
            throw new Error(`boom ${failures}`);
          }
        },
        {
          fromBeginning: true,
          retryDelayMs: 20,
          onError: (e, ms) => errors.push(`${(e as Error).message}@${text(ms[0])}`),
        },
      );
      await t.publish(
        topic,
        ['m0', 'm1', 'm2', 'm3', 'm4'].map((v) => msg('agent-7', v)),
      );
      await until('all five handled', () => seen.includes('m4'));
      await sub.close();
      assert.deepEqual(seen, ['m0', 'm1', 'm2', 'm2', 'm2', 'm3', 'm4']);
      assert.deepEqual(errors, ['boom 1@m2', 'boom 2@m2']);
    });

    it("delivers a message whose handler never succeeded again to the group's next subscriber", async () => {
      const topic = unique('redeliver');
      const group = unique('g');
      await t.publish(topic, [msg('req-1', 'fragile'), msg('req-1', 'next')]);
      let attempts = 0;
      const sub1 = await t.subscribe(
        topic,
        group,
        async () => {
          attempts++;
          throw new Error('store down');
        },
        { fromBeginning: true, retryDelayMs: 20 },
      );
      await until('a failed attempt', () => attempts >= 2);
      const closeStarted = Date.now();
      await sub1.close();
      assert.ok(Date.now() - closeStarted < 5000, 'close does not wait for the failing handler to succeed');
      const got: string[] = [];
      const other = await open();
      const sub2 = await other.subscribe(topic, group, async (m) => void got.push(text(m)), { fromBeginning: true });
      await until('both messages', () => got.length >= 2);
      await sub2.close();
      assert.deepEqual(got, ['fragile', 'next']);
    });

    it('hands a batch subscriber consecutive messages of one partition and commits them together', async () => {
      const topic = unique('batch');
      const group = unique('g');
      await t.publish(
        topic,
        Array.from({ length: 50 }, (_, i) => msg('agent-2', `b${i}`)),
      );
      const batches: TransportMessage[][] = [];
      const sub = await t.subscribeBatch(topic, group, async (ms) => void batches.push([...ms]), {
        fromBeginning: true,
      });
      await until('50 messages in batches', () => batches.flat().length >= 50);
      await sub.close();
      const flat = batches.flat().map(text);
      assert.deepEqual(
        flat,
        Array.from({ length: 50 }, (_, i) => `b${i}`),
      );
      for (const b of batches) assert.equal(new Set(b.map((m) => m.partition)).size, 1, 'a batch holds one partition');
      await t.publish(topic, msg('agent-2', 'after'));
      const later: string[] = [];
      const sub2 = await t.subscribeBatch(topic, group, async (ms) => void later.push(...ms.map(text)), {
        fromBeginning: true,
      });
      await until('the message after the batches', () => later.length >= 1);
      await sub2.close();
      assert.deepEqual(later, ['after'], 'committed batches are not delivered again');
    });

    it('refuses invalid input with a code and writes nothing of a refused call', async () => {
      const topic = unique('invalid');
      const code = (c: string) => (e: unknown) => (e as { code?: string }).code === c;
      await assert.rejects(t.publish('bad topic!', msg('k', 'v')), code('TRANSPORT_TOPIC_INVALID'));
      await assert.rejects(t.publish(topic, [msg('k', 'ok'), msg('', 'v')]), code('TRANSPORT_MESSAGE_INVALID'));
      await assert.rejects(
        t.publish(topic, { key: 'k', value: 'text' as unknown as Uint8Array }),
        code('TRANSPORT_MESSAGE_INVALID'),
      );
      await assert.rejects(
        t.publish(topic, { key: 'k', value: Buffer.from('v'), headers: { n: 1 as unknown as string } }),
        code('TRANSPORT_MESSAGE_INVALID'),
      );
      await assert.rejects(t.publish(topic, msg('k', 'x'.repeat(1_000_001))), code('TRANSPORT_MESSAGE_TOO_LARGE'));
      await assert.rejects(
        t.subscribe(topic, '', async () => {}),
        code('TRANSPORT_GROUP_INVALID'),
      );
      await t.publish(topic, msg('k', 'marker'));
      const got: string[] = [];
      const sub = await t.subscribe(topic, unique('g'), async (m) => void got.push(text(m)), { fromBeginning: true });
      await until('the marker', () => got.length >= 1);
      await sleep(100);
      await sub.close();
      assert.deepEqual(got, ['marker']);
    });

    it('refuses publish and subscribe after close with TRANSPORT_CLOSED', async () => {
      const x = await h.open();
      await x.close();
      await x.close(); // idempotent
      const code = (e: unknown) => (e as { code?: string }).code === 'TRANSPORT_CLOSED';
      await assert.rejects(x.publish(unique('closed'), msg('k', 'v')), code);
      await assert.rejects(
        x.subscribe(unique('closed'), 'g', async () => {}),
        code,
      );
    });

    it('delivers every message twice through withDuplicateDelivery', async () => {
      const topic = unique('dup');
      const dup = withDuplicateDelivery(t);
      const seen: string[] = [];
      const sub = await dup.subscribe(topic, unique('g'), async (m) => void seen.push(text(m)), {
        fromBeginning: true,
      });
      const batches: string[][] = [];
      const bsub = await dup.subscribeBatch(topic, unique('g'), async (ms) => void batches.push(ms.map(text)), {
        fromBeginning: true,
      });
      await dup.publish(
        topic,
        ['a', 'b', 'c'].map((v) => msg('agent-9', v)),
      );
      await until('six deliveries', () => seen.length >= 6 && batches.flat().length >= 6);
      await Promise.all([sub.close(), bsub.close()]);
      assert.deepEqual(seen, ['a', 'a', 'b', 'b', 'c', 'c']);
      const flat = batches.flat();
      assert.deepEqual([...flat].sort(), ['a', 'a', 'b', 'b', 'c', 'c']);
      for (let i = 0; i < batches.length; i += 2)
        assert.deepEqual(batches[i], batches[i + 1], 'each batch comes twice');
    });
  });
}
