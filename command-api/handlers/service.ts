// The control plane's application service: a command and its metadata in, events appended out. Validates the
// command (zod; unknown fields refused), routes it to its aggregate's stream, and runs the store's retrying
// command handler (load, decide, append with the expected revision; on a concurrent append decide again),
// one command per stream at a time in this process, with the folded aggregates cached between commands.
// No HTTP here: the fastify routes call `execute`.
import { isIsoUtc } from '../../domain/shared/time.js';
import { DEFAULT_LOG_LIMITS, type LogLimits } from '../../protocol/log-limits.js';
import { DomainError, DomainErrorCode } from '../../domain/shared/errors.js';
import type { DomainEvent } from '../../domain/events/types.js';
import { AggregateCache } from '../../eventstore/aggregate-cache.js';
import { type EventCodec, handleCommand } from '../../eventstore/handle-command.js';
import { fenced, type FencedState, type Stamped } from '../../domain/shared/fencing.js';
import type { EventStore } from '../../eventstore/port.js';
import { domainCodec, type CommandMetadata } from './codec.js';
import { routeOf, type ControlPlaneCommand, type DomainCommand } from './commands.js';
import { commandSchema } from './schemas.js';
import { StreamLocks } from './stream-lock.js';
import { TERMINAL, type RequestStatus } from '../../domain/request/state.js';

export interface CommandOutcome {
  streamId: string;
  /** The events the command decided ([] when there was nothing to do). */
  events: DomainEvent[];
  /** Global position of the command's last event; undefined when nothing was appended. */
  position: number | undefined;
  /** The command had been handled before (same command id): nothing new was appended. */
  alreadyStored: boolean;
  /** Revision of the stream's last event afterwards (-1: no events). */
  nextRevision: number;
  attempts: number;
}

export interface ControlPlaneCommandsOptions {
  /** Attempts on concurrent appends before ES_COMMAND_CONFLICT. Default 5. */
  maxAttempts?: number;
  /** Lines and bytes each attempt of a request may log (default DEFAULT_LOG_LIMITS: 10000 lines, 1 MiB). */
  logLimits?: LogLimits;
  /** Aggregates whose folded state is kept between commands (least recently used dropped). Default 10000. */
  cachedStreams?: number;
  /** Called after every command that appended events (the embedded fabric wakes the scheduler with it). */
  onAppended?(outcome: CommandOutcome, command: ControlPlaneCommand, meta: CommandMetadata): void;
  /** Called for every accepted heartbeat (heartbeats are not stored; the scheduler's agent health rule needs them). */
  onHeartbeat?(agentId: string, bootId: string, at: string): void;
  /**
   * Whether a heartbeat from this agent boot is routine: the agent is known ACTIVE or DRAINING with this boot (the
   * control plane asks its live view). A routine heartbeat is handed to onHeartbeat without running a command (no
   * stream read, nothing decided; the outcome has attempts 0); any other one runs the command, which decides the
   * transition (AgentReturned) or the refusal. Without it every heartbeat runs the command.
   */
  heartbeatIsRoutine?(agentId: string, bootId: string): boolean;
}

/** Checks a command's shape: returns it typed, or throws CP_INVALID_COMMAND naming the field. Changes nothing. */
export function parseCommand(input: unknown): ControlPlaneCommand {
  const r = commandSchema.safeParse(input);
  if (r.success) return r.data as ControlPlaneCommand;
  const issue = r.error.issues[0];
  const path = issue.path.join('.');
  const type = typeof (input as { type?: unknown })?.type === 'string' ? (input as { type: string }).type : undefined;
  throw new DomainError(
    DomainErrorCode.invalidCommand,
    `${type ?? 'command'}${path ? ` field ${path}` : ''}: ${issue.message}`,
    type === undefined || path === 'type'
      ? 'a command needs a known "type" (see docs/events.md, "Commands")'
      : 'fix the field named and send the command again',
    { issues: r.error.issues.slice(0, 10).map((i) => ({ path: i.path.join('.'), message: i.message })) },
  );
}

/** The domain codec for a fenced decider: the leader epoch travels in the events' metadata (`leaderEpoch`). */
function stampedCodec(codec: EventCodec<DomainEvent>): EventCodec<Stamped<DomainEvent>> {
  return {
    encode: (e, index) => codec.encode(e.event, index),
    decode(stored) {
      const leaderEpoch = stored.metadata.leaderEpoch;
      return typeof leaderEpoch === 'number'
        ? { event: codec.decode(stored), leaderEpoch }
        : { event: codec.decode(stored) };
    },
  };
}

function checkMetadata(meta: CommandMetadata): void {
  const bad = (field: string, message: string): never => {
    throw new DomainError(DomainErrorCode.invalidCommand, `command metadata ${field} ${message}`);
  };
  if (typeof meta?.commandId !== 'string' || meta.commandId.length === 0 || meta.commandId.length > 200)
    bad('commandId', 'must be a non-empty string of at most 200 characters');
  if (typeof meta.actor !== 'string' || meta.actor.length === 0 || meta.actor.length > 200)
    bad('actor', 'must be a non-empty string of at most 200 characters');
  if (typeof meta.at !== 'string' || !isIsoUtc(meta.at))
    bad('at', `must be ISO-8601 UTC (Date#toISOString()), got ${JSON.stringify(meta.at)}`);
  if (meta.leaderEpoch !== undefined && (!Number.isSafeInteger(meta.leaderEpoch) || meta.leaderEpoch < 1))
    bad('leaderEpoch', `must be a positive integer, got ${JSON.stringify(meta.leaderEpoch)}`);
}

export class ControlPlaneCommands {
  private readonly locks = new StreamLocks();
  /** Folded aggregates by stream (request, deployment and agent streams have distinct prefixes). */
  readonly cache: AggregateCache<unknown>;
  readonly logLimits: LogLimits;

  constructor(
    private readonly store: EventStore,
    private readonly options: ControlPlaneCommandsOptions = {},
  ) {
    this.cache = new AggregateCache({ maxStreams: options.cachedStreams });
    this.logLimits = options.logLimits ?? DEFAULT_LOG_LIMITS;
  }

  /** Validates, decides and appends one command. Refusals throw a DomainError (or a store error) and append nothing. */
  async execute(input: ControlPlaneCommand, meta: CommandMetadata): Promise<CommandOutcome> {
    checkMetadata(meta);
    const command = parseCommand(input);
    const route = routeOf(command);
    if (command.type === 'ReportAgentHeartbeat' && this.options.heartbeatIsRoutine?.(command.agentId, command.bootId)) {
      this.options.onHeartbeat?.(command.agentId, command.bootId, meta.at);
      return {
        streamId: route.streamId,
        events: [],
        position: undefined,
        alreadyStored: false,
        nextRevision: -1,
        attempts: 0,
      };
    }
    const domainCommand = (
      command.type === 'ReportRequestLog'
        ? { ...command, at: meta.at, limits: this.logLimits }
        : { ...command, at: meta.at }
    ) as DomainCommand;
    const leaderEpoch = meta.leaderEpoch;
    const codec = domainCodec(leaderEpoch === undefined ? meta : { ...meta, extra: { ...meta.extra, leaderEpoch } });
    const r = await this.locks.run(route.streamId, () =>
      handleCommand(this.store, {
        streamId: route.streamId,
        command: leaderEpoch === undefined ? domainCommand : { ...domainCommand, leaderEpoch },
        decider: fenced(route.decider),
        codec: stampedCodec(codec),
        maxAttempts: this.options.maxAttempts,
        cache: this.cache,
      }),
    );
    // A finished request's stream is rarely commanded again (a late report, its result's expiry): its folded state
    // leaves the cache, which then holds the live requests rather than every recent one.
    if (route.streamId.startsWith('request-')) {
      // The cache holds the fenced state (the decider's own under `inner`).
      const state = this.cache.peek(route.streamId)?.state as FencedState<{ status?: RequestStatus }> | undefined;
      const status = state?.inner.status;
      if (status !== undefined && TERMINAL.has(status)) this.cache.delete(route.streamId);
    }
    const outcome: CommandOutcome = {
      streamId: route.streamId,
      events: r.events.map((e) => e.event),
      position: r.position,
      alreadyStored: r.alreadyStored,
      nextRevision: r.nextRevision,
      attempts: r.attempts,
    };
    if (command.type === 'ReportAgentHeartbeat') this.options.onHeartbeat?.(command.agentId, command.bootId, meta.at);
    if (r.events.length > 0 && !r.alreadyStored) this.options.onAppended?.(outcome, command, meta);
    return outcome;
  }
}
