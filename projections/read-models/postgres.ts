// The query API's read models in PostgreSQL: the request rows and histories (requests.ts) and the audit index
// (audit.ts), each run by a ReadModelRunner that commits a batch's rows and its checkpoint in one transaction
// (projections/runner/read-model-runner.ts), over any event store.
import pg from 'pg';
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import { FabricError } from '../../protocol/errors.js';
import type { ProjectionStatus } from '../runner/projection.js';
import { PostgresCheckpoints } from '../runner/postgres-checkpoints.js';
import { ReadModelRunner, type ReadModelRunnerOptions } from '../runner/read-model-runner.js';
import { auditReadModel } from './audit.js';
import type { AuditIndexFilter, AuditReadModel, QueryReadModels, RequestReadModel, RequestRow } from './port.js';
import { requestsReadModel } from './requests.js';
import { ident, SCHEMA_NAME } from './schema.js';
import { serializedTarget } from './target.js';

export interface PostgresReadModelsOptions {
  store: EventStore;
  /** Either a pool owned by the caller (not ended by stop) or a connection string. */
  pool?: pg.Pool;
  connectionString?: string;
  /** Schema of the tables and their checkpoints. Default 'public'. */
  schema?: string;
  runner?: Omit<ReadModelRunnerOptions, 'onFailure'>;
  /** Told once when a read model stops at an event or on a database failure. */
  onFailure?(status: ProjectionStatus): void;
}

/** The LIKE pattern of "starts with `prefix`". */
function likePrefix(prefix: string): string {
  return `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export class PostgresReadModels implements QueryReadModels {
  readonly describe: string;
  readonly requests: RequestReadModel;
  readonly audit: AuditReadModel;
  private readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly requestsRunner: ReadModelRunner<pg.PoolClient>;
  private readonly auditRunner: ReadModelRunner<pg.PoolClient>;

  constructor(options: PostgresReadModelsOptions) {
    const schema = options.schema ?? 'public';
    if (!SCHEMA_NAME.test(schema)) {
      throw new FabricError('FABRIC_CONFIG_INVALID', 500, `read-model schema ${JSON.stringify(schema)} is not valid`, {
        hint: 'use letters, digits and _ (up to 63), starting with a letter or _',
      });
    }
    if ((options.pool === undefined) === (options.connectionString === undefined))
      throw new TypeError('give either pool or connectionString');
    this.ownsPool = options.pool === undefined;
    this.pool = options.pool ?? new pg.Pool({ connectionString: options.connectionString, max: 6 });
    this.describe = `postgres read models (schema ${schema})`;
    const checkpoints = new PostgresCheckpoints(this.pool, schema);
    const runnerOptions = { ...options.runner, onFailure: options.onFailure };
    const rp = requestsReadModel(schema);
    const ap = auditReadModel(schema);
    this.requestsRunner = new ReadModelRunner(options.store, rp, serializedTarget(checkpoints, rp.name), runnerOptions);
    this.auditRunner = new ReadModelRunner(options.store, ap, serializedTarget(checkpoints, ap.name), runnerOptions);
    const s = ident(schema);
    const pool = this.pool;
    const requestsRunner = this.requestsRunner;
    const auditRunner = this.auditRunner;

    this.requests = {
      waitForPosition: (p, t) => requestsRunner.waitForPosition(p, t),
      catchUp: (t) => requestsRunner.catchUp(t),
      async get(requestId: string): Promise<RequestRow | undefined> {
        const r = await pool.query<{ position: string; view: RequestRow['view'] }>(
          `SELECT position, view FROM ${s}.rm_requests WHERE request_id = $1`,
          [requestId],
        );
        const row = r.rows[0];
        return row === undefined ? undefined : { view: row.view, position: Number(row.position) };
      },
      async events(requestId: string): Promise<StoredEvent[]> {
        const r = await pool.query<{ event: StoredEvent }>(
          `SELECT event FROM ${s}.rm_request_events WHERE request_id = $1 ORDER BY position`,
          [requestId],
        );
        return r.rows.map((x) => x.event);
      },
    };

    this.audit = {
      catchUp: (t) => auditRunner.catchUp(t),
      async positions(f: AuditIndexFilter): Promise<number[]> {
        const where = ['position > $1'];
        const params: unknown[] = [f.afterPosition];
        const add = (sql: string, v: unknown) => {
          params.push(v);
          where.push(sql.replace('?', `$${params.length}`));
        };
        if (f.modelKey !== undefined) add('model_key = ?', f.modelKey);
        if (f.actor !== undefined) add('actor = ?', f.actor);
        if (f.correlationId !== undefined) add('correlation_id = ?', f.correlationId);
        if (f.causationId !== undefined) add('causation_id = ?', f.causationId);
        if (f.type !== undefined) add('type = ?', f.type);
        if (f.streamPrefix !== undefined) add("stream_id LIKE ? ESCAPE '\\'", likePrefix(f.streamPrefix));
        if (f.fromAt !== undefined) add('at >= ?::timestamptz', f.fromAt);
        if (f.toAt !== undefined) add('at < ?::timestamptz', f.toAt);
        params.push(f.limit);
        const r = await pool.query<{ position: string }>(
          `SELECT position FROM ${s}.rm_audit WHERE ${where.join(' AND ')} ORDER BY position LIMIT $${params.length}`,
          params,
        );
        return r.rows.map((x) => Number(x.position));
      },
    };
  }

  /** Creates the tables when missing (or rebuilds them after a version change) and starts following the store. */
  async start(): Promise<void> {
    await this.requestsRunner.start();
    await this.auditRunner.start();
  }

  /** Resolves once both read models hold every event stored when this was called. */
  async catchUp(timeoutMs = 30_000): Promise<void> {
    await Promise.all([this.requestsRunner.catchUp(timeoutMs), this.auditRunner.catchUp(timeoutMs)]);
  }

  status(): ProjectionStatus[] {
    return [this.requestsRunner.status(), this.auditRunner.status()];
  }

  async stop(): Promise<void> {
    await this.requestsRunner.stop();
    await this.auditRunner.stop();
    if (this.ownsPool) await this.pool.end();
  }
}
