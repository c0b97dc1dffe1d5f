// Kafka-only behaviour: what a crashed consumer process leaves behind, agents of two fabrics with the same id on
// one broker, and an unreachable broker.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { assignmentsGroupId } from '../../gpu-agent/agent/assignments-group.js';
import { KafkaTransport } from '../../transport/index.js';
import { requireService } from '../services/require.js';

const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

if (brokers) {
  test('a message whose consumer process was killed mid-handler is delivered again to the group', async () => {
    const topic = `crash-${randomUUID().slice(0, 8)}`;
    const group = `g-${randomUUID().slice(0, 8)}`;
    const producer = await KafkaTransport.connect({ brokers: brokers.split(','), clientId: 'ndif-crash-test' });
    try {
      await producer.publish(topic, { key: 'agent-1', value: Buffer.from('assignment-1') });
      const child = spawn(
        process.execPath,
        [fileURLToPath(new URL('./fixtures/stuck-consumer.js', import.meta.url)), brokers, topic, group],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      let out = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('handling assignment-1')) resolve();
        });
        child.on('exit', (code) => reject(new Error(`consumer exited early (${code}): ${out}`)));
      });
      child.kill('SIGKILL');
      const got: string[] = [];
      const consumer = await KafkaTransport.connect({
        brokers: brokers.split(','),
        clientId: 'ndif-crash-test',
        consumer: { sessionTimeoutMs: 3000, heartbeatIntervalMs: 500 },
      });
      const t0 = Date.now();
      const sub = await consumer.subscribe(topic, group, async (m) => void got.push(m.value.toString()), {
        fromBeginning: true,
      });
      while (got.length === 0 && Date.now() - t0 < 30_000) await new Promise((r) => setTimeout(r, 20));
      await sub.close();
      await consumer.close();
      assert.deepEqual(got, ['assignment-1']);
    } finally {
      await producer.close();
    }
  });
}

if (brokers) {
  test('agents of two fabrics with the same id on one broker each get their own assignments only', async () => {
    const tag = randomUUID().slice(0, 8);
    const topics = [`fab1-${tag}.assignments`, `fab2-${tag}.assignments`];
    const groups = topics.map((t) => assignmentsGroupId('same-agent', t));
    assert.notEqual(groups[0], groups[1]);
    assert.equal(assignmentsGroupId('a', 'x'.repeat(249)).length <= 255, true);
    const connect = () =>
      KafkaTransport.connect({ brokers: brokers.split(','), clientId: 'ndif-groups-test', partitions: 2 });
    const [t1, t2, producer] = await Promise.all([connect(), connect(), connect()]);
    const got: string[][] = [[], []];
    try {
      const subs = await Promise.all(
        [t1, t2].map((t, i) =>
          t.subscribe(topics[i]!, groups[i]!, async (m) => void got[i]!.push(m.value.toString()), {
            fromBeginning: true,
          }),
        ),
      );
      for (let n = 0; n < 4; n++)
        for (const [i, topic] of topics.entries())
          await producer.publish(topic, { key: 'same-agent', value: Buffer.from(`fabric${i + 1}-${n}`) });
      const end = Date.now() + 30_000;
      while ((got[0]!.length < 4 || got[1]!.length < 4) && Date.now() < end)
        await new Promise((r) => setTimeout(r, 20));
      await Promise.all(subs.map((s) => s.close()));
      assert.deepEqual(
        got,
        [0, 1].map((i) => Array.from({ length: 4 }, (_, n) => `fabric${i + 1}-${n}`)),
      );
    } finally {
      await Promise.all([t1, t2, producer].map((t) => t.close()));
    }
  });
}

test('connecting to a port where no broker listens fails with TRANSPORT_UNAVAILABLE', async () => {
  const port = await freePort();
  await assert.rejects(
    KafkaTransport.connect({ brokers: [`127.0.0.1:${port}`], retries: 1, connectionTimeoutMs: 500, log: () => {} }),
    (e: unknown) => {
      const err = e as { code?: string; message: string; hint?: string };
      assert.equal(err.code, 'TRANSPORT_UNAVAILABLE');
      assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.match(err.hint ?? '', /KAFKA_BROKERS/);
      return true;
    },
  );
});

test('a broker list that is not host:port is refused with TRANSPORT_CONFIG_INVALID', async () => {
  await assert.rejects(KafkaTransport.connect({ brokers: ['localhost'] }), { code: 'TRANSPORT_CONFIG_INVALID' });
  await assert.rejects(KafkaTransport.connect({ brokers: [] }), { code: 'TRANSPORT_CONFIG_INVALID' });
  await assert.rejects(KafkaTransport.connect({ brokers: ['127.0.0.1:9092'], partitions: 0 }), {
    code: 'TRANSPORT_CONFIG_INVALID',
  });
});
