// API keys in PostgreSQL (the distributed fabric): one table in a schema of the caller's choice.
import pg from 'pg';
import { limitsFromText, limitsToText, type ApiKeyStore, type KeyTags, type StoredApiKey } from './port.js';

export interface PgApiKeyStoreOptions {
  connectionString?: string;
  /** A pool to share (not ended by close()). */
  pool?: pg.Pool;
  /** Schema of the table (created when missing). Default `public`. */
  schema?: string;
}

type Row = {
  id: string;
  hash: string;
  label: string;
  trusted: boolean;
  priority: boolean;
  operator: boolean;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
  revoked_by: string | null;
  limits: string | null;
};

function tagsOf(r: Row): KeyTags {
  const tags: KeyTags = { trusted: r.trusted, priority: r.priority, operator: r.operator };
  const limits = limitsFromText(r.limits);
  if (limits !== undefined) tags.limits = limits;
  return tags;
}

const toKey = (r: Row): StoredApiKey => ({
  id: r.id,
  hash: r.hash,
  label: r.label,
  tags: tagsOf(r),
  createdAt: r.created_at,
  createdBy: r.created_by,
  revokedAt: r.revoked_at,
  revokedBy: r.revoked_by,
});

export class PgApiKeyStore implements ApiKeyStore {
  readonly kind = 'postgres' as const;
  private readonly table: string;
  private closed = false;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly ownsPool: boolean,
    schema: string,
  ) {
    this.table = `"${schema}".api_keys`;
  }

  static async open(options: PgApiKeyStoreOptions): Promise<PgApiKeyStore> {
    const schema = options.schema ?? 'public';
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema))
      throw new TypeError(`schema ${JSON.stringify(schema)} is not a plain lowercase identifier`);
    const pool = options.pool ?? new pg.Pool({ connectionString: options.connectionString, max: 4 });
    const store = new PgApiKeyStore(pool, options.pool === undefined, schema);
    try {
      // One implicit transaction under an advisory lock: the API processes start at once on a fresh database, and
      // concurrent CREATE … IF NOT EXISTS can still collide in the catalog.
      // Times are kept as the ISO strings they were given (text), like the SQLite adapter.
      await pool.query(`SELECT pg_advisory_xact_lock(${0x4e444946}, ${0x4b455953} /* 'KEYS' */);
        CREATE SCHEMA IF NOT EXISTS "${schema}";
        CREATE TABLE IF NOT EXISTS ${store.table} (
        id text PRIMARY KEY, hash text NOT NULL, label text NOT NULL,
        trusted boolean NOT NULL, priority boolean NOT NULL, operator boolean NOT NULL,
        created_at text NOT NULL, created_by text NOT NULL, revoked_at text, revoked_by text);
        ALTER TABLE ${store.table} ADD COLUMN IF NOT EXISTS limits text`);
    } catch (e) {
      if (store.ownsPool) await pool.end().catch(() => undefined);
      throw e;
    }
    return store;
  }

  async insert(k: StoredApiKey): Promise<void> {
    await this.pool.query(
      `INSERT INTO ${this.table} (id, hash, label, trusted, priority, operator, created_at, created_by, revoked_at, revoked_by, limits) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [
        k.id,
        k.hash,
        k.label,
        k.tags.trusted,
        k.tags.priority,
        k.tags.operator,
        k.createdAt,
        k.createdBy,
        k.revokedAt,
        k.revokedBy,
        limitsToText(k.tags.limits),
      ],
    );
  }

  async get(id: string): Promise<StoredApiKey | undefined> {
    const r = await this.pool.query<Row>(`SELECT * FROM ${this.table} WHERE id = $1`, [id]);
    return r.rows[0] === undefined ? undefined : toKey(r.rows[0]);
  }

  async list(): Promise<StoredApiKey[]> {
    return (await this.pool.query<Row>(`SELECT * FROM ${this.table} ORDER BY created_at, id`)).rows.map(toKey);
  }

  async revoke(id: string, at: string, by: string): Promise<StoredApiKey | undefined> {
    await this.pool.query(
      `UPDATE ${this.table} SET revoked_at = $1, revoked_by = $2 WHERE id = $3 AND revoked_at IS NULL`,
      [at, by, id],
    );
    return this.get(id);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
  }
}
