// Which transport a process uses, read from its environment:
//   NDIF_TRANSPORT        inprocess (default) | kafka | ipc
//   NDIF_IPC_SOCKET       Unix socket of the control plane's broker (required for ipc: the embedded agent process)
//   KAFKA_BROKERS         host:port[,host:port...]   (required for kafka)
//   KAFKA_CLIENT_ID       default "ndif"
//   NDIF_KAFKA_PARTITIONS partitions of the topics the transport creates, default 4
//   NDIF_KAFKA_LINGER_MS  wait before sending a batch, default 0
//   NDIF_KAFKA_SESSION_TIMEOUT_MS  a consumer silent this long leaves its group, default 10000 (the broker's
//                         group.min/max.session.timeout.ms bound it); a process killed and started again
//                         gets its partitions back after this long
import { DEFAULT_TOPICS } from './relay/wire.js';
import { configInvalid } from './errors.js';
import type { InProcessBroker } from './inprocess/broker.js';
import { InProcessTransport } from './inprocess/transport.js';
import { IpcTransport } from './ipc/client.js';
import type { KafkaTransportOptions } from './kafka/options.js';
import type { Transport } from './port.js';

export type TransportConfig =
  | { kind: 'inprocess' }
  | { kind: 'kafka'; kafka: KafkaTransportOptions }
  | { kind: 'ipc'; socketPath: string };

function nonNegativeInt(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    throw configInvalid(
      `${name}=${JSON.stringify(raw)} is not an integer >= ${min}`,
      `set ${name} to an integer >= ${min} or unset it`,
      { [name]: raw },
    );
  }
  return n;
}

export function transportConfigFromEnv(env: NodeJS.ProcessEnv = process.env): TransportConfig {
  const kind = env.NDIF_TRANSPORT || 'inprocess';
  if (kind === 'inprocess') return { kind };
  if (kind === 'ipc') {
    const socketPath = env.NDIF_IPC_SOCKET ?? '';
    if (socketPath === '')
      throw configInvalid(
        'NDIF_TRANSPORT=ipc needs NDIF_IPC_SOCKET',
        "set NDIF_IPC_SOCKET to the control plane's transport socket (the embedded fabric sets it for its agent)",
      );
    return { kind, socketPath };
  }
  if (kind !== 'kafka') {
    throw configInvalid(
      `NDIF_TRANSPORT=${JSON.stringify(kind)} is not a transport`,
      'use NDIF_TRANSPORT=inprocess, kafka or ipc',
      { NDIF_TRANSPORT: kind },
    );
  }
  const brokers = (env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  if (brokers.length === 0) {
    throw configInvalid('NDIF_TRANSPORT=kafka needs KAFKA_BROKERS', 'set KAFKA_BROKERS=host:port[,host:port...]');
  }
  const assignments = env.NDIF_TOPIC_ASSIGNMENTS || DEFAULT_TOPICS.assignments;
  const kafka: KafkaTransportOptions = {
    brokers,
    clientId: env.KAFKA_CLIENT_ID || 'ndif',
    // Each agent's assignment topic: one partition (one consumer, order per agent).
    topicPartitions: { [`${assignments}.agent.*`]: 1, [`${assignments}.agent-h.*`]: 1 },
  };
  const partitions = nonNegativeInt(env, 'NDIF_KAFKA_PARTITIONS', 1);
  if (partitions !== undefined) kafka.partitions = partitions;
  const linger = nonNegativeInt(env, 'NDIF_KAFKA_LINGER_MS', 0);
  if (linger !== undefined) kafka.lingerMs = linger;
  const session = nonNegativeInt(env, 'NDIF_KAFKA_SESSION_TIMEOUT_MS', 1000);
  if (session !== undefined) {
    // kafkajs heartbeats on this interval; a third of the session leaves room for two missed ones.
    kafka.consumer = { sessionTimeoutMs: session, heartbeatIntervalMs: Math.min(1000, Math.floor(session / 3)) };
  }
  return { kind: 'kafka', kafka };
}

/** Opens the configured transport. In-process transports opened with the same broker see each other. */
export async function openTransport(
  config: TransportConfig,
  inprocess: { broker?: InProcessBroker } = {},
): Promise<Transport> {
  if (config.kind === 'inprocess') return new InProcessTransport({ broker: inprocess.broker });
  if (config.kind === 'ipc') return IpcTransport.connect({ path: config.socketPath });
  // Loaded only where it is used: kafkajs costs ~150 ms of CPU to import, in every agent and control plane started.
  const { KafkaTransport } = await import('./kafka/transport.js');
  return KafkaTransport.connect(config.kafka);
}
