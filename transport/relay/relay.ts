// The relay between the control plane and the GPU agents: assignments out (store → transport), agent events in
// (transport → command handlers → store). The same code runs embedded (in-process transport, agents over the IPC
// socket) and distributed (Kafka).
import type { Logger } from 'pino';
import type { BlobStore } from '../../blobstore/port.js';
import type { EventStore } from '../../eventstore/port.js';
import type { SnapshotStore } from '../../projections/runner/projection.js';
import type { Transport } from '../port.js';
import { AgentEventIntake, type CommandExecutor } from './agent-events.js';
import { AssignmentRelay } from './assignment-relay.js';
import { DEFAULT_TOPICS, type RelayTopics } from './wire.js';

export interface RelayOptions {
  store: EventStore;
  snapshots: SnapshotStore;
  transport: Transport;
  blobs: BlobStore;
  commands: CommandExecutor;
  log: Logger;
  topics?: RelayTopics;
  groupId?: string;
  clock?: () => number;
  checkpointEveryMs?: number;
  restartDelayMs?: number;
}

export class Relay {
  readonly assignments: AssignmentRelay;
  readonly intake: AgentEventIntake;

  constructor(options: RelayOptions) {
    const topics = options.topics ?? DEFAULT_TOPICS;
    this.assignments = new AssignmentRelay({ ...options, topic: topics.assignments });
    this.intake = new AgentEventIntake({ ...options, topics });
  }

  async start(): Promise<void> {
    await this.intake.start();
    await this.assignments.start();
  }

  async stop(): Promise<void> {
    await this.intake.stop();
    await this.assignments.stop();
  }
}
