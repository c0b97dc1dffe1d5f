// `npm run bench -- transport` (with KAFKA_BROKERS set, e.g. through `node scripts/services/cli.mjs kafka -- ...`):
// publish→handler latency and throughput of the in-process and Kafka transports.
import { randomUUID } from 'node:crypto';
import { InProcessTransport, KafkaTransport, type Transport } from '../transport/index.js';

const LATENCY_ROUNDS = 300;
const THROUGHPUT_MESSAGES = 20_000;
const VALUE = Buffer.alloc(200, 7); // about the size of an agent event

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function latency(t: Transport): Promise<{ p50_ms: number; p99_ms: number }> {
  const topic = `bench-lat-${randomUUID().slice(0, 8)}`;
  let arrived: (() => void) | undefined;
  const sub = await t.subscribe(topic, `g-${topic}`, async () => arrived?.());
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_ROUNDS + 20; i++) {
    const got = new Promise<void>((r) => (arrived = r));
    const t0 = performance.now();
    await t.publish(topic, { key: `agent-${i % 4}`, value: VALUE });
    await got;
    if (i >= 20) samples.push(performance.now() - t0); // the first rounds warm connections and JIT
  }
  await sub.close();
  samples.sort((a, b) => a - b);
  return { p50_ms: +percentile(samples, 50).toFixed(3), p99_ms: +percentile(samples, 99).toFixed(3) };
}

/** Publishes one message per publish() call, all calls in flight together (a relay's pattern). */
async function throughput(t: Transport, batch: boolean): Promise<{ publish_per_s: number; end_to_end_per_s: number }> {
  const topic = `bench-tp-${randomUUID().slice(0, 8)}`;
  let received = 0;
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  const count = (n: number) => {
    received += n;
    if (received >= THROUGHPUT_MESSAGES) done();
  };
  const sub = batch
    ? await t.subscribeBatch(topic, `g-${topic}`, async (ms) => count(ms.length))
    : await t.subscribe(topic, `g-${topic}`, async () => count(1));
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: THROUGHPUT_MESSAGES }, (_, i) => t.publish(topic, { key: `request-${i % 64}`, value: VALUE })),
  );
  const published = performance.now() - t0;
  await all;
  const total = performance.now() - t0;
  await sub.close();
  return {
    publish_per_s: Math.round(THROUGHPUT_MESSAGES / (published / 1000)),
    end_to_end_per_s: Math.round(THROUGHPUT_MESSAGES / (total / 1000)),
  };
}

async function measure(t: Transport) {
  return { latency: await latency(t), per_message: await throughput(t, false), batch: await throughput(t, true) };
}

export async function run(): Promise<Record<string, unknown>> {
  const brokers = process.env.KAFKA_BROKERS;
  if (!brokers)
    throw new Error(
      'KAFKA_BROKERS is not set: run `node scripts/services/cli.mjs kafka -- npm run bench -- transport`',
    );
  const inproc = new InProcessTransport();
  const inprocess = await measure(inproc);
  await inproc.close();
  const kt = await KafkaTransport.connect({ brokers: brokers.split(','), clientId: 'ndif-bench' });
  const kafka = await measure(kt);
  await kt.close();
  return {
    inprocess,
    kafka,
    kafka_over_inproc_p50: +(kafka.latency.p50_ms / inprocess.latency.p50_ms).toFixed(1),
    messages: THROUGHPUT_MESSAGES,
    value_bytes: VALUE.byteLength,
  };
}
