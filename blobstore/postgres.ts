// The distributed blob store: PostgreSQL large objects, one row per blob pointing at its object.
// put and delete are single statements, so a blob and its row appear and disappear together.
import pg from 'pg';
import { blobCorrupt, blobNotFound, configInvalid } from './errors.js';
import { checkPut, checkRef, DEFAULT_MAX_BLOB_BYTES, newRef, sha256 } from './checks.js';
import type { BlobInfo, BlobStore, GetOptions, PutOptions, StoredBlob } from './port.js';

export interface PgBlobStoreOptions {
  /** A pool to share, or a connection string for a pool of this store's own. */
  pool?: pg.Pool;
  connectionString?: string;
  /** Default "ndif_blobs". */
  table?: string;
  maxBytes?: number;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

interface Row {
  ref: string;
  size: string;
  sha256: string;
  content_type: string;
  bytes?: Buffer;
}

const toInfo = (r: Row): BlobInfo => ({
  ref: r.ref,
  size: Number(r.size),
  sha256: r.sha256,
  contentType: r.content_type,
});

export class PgBlobStore implements BlobStore {
  readonly kind = 'postgres' as const;
  private readonly maxBytes: number;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly ownsPool: boolean,
    private readonly table: string,
    options: PgBlobStoreOptions,
  ) {
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BLOB_BYTES;
  }

  /** Connects and creates the table if needed. */
  static async open(options: PgBlobStoreOptions): Promise<PgBlobStore> {
    const table = options.table ?? 'ndif_blobs';
    if (!IDENTIFIER.test(table))
      throw configInvalid(
        `blob table name ${JSON.stringify(table)} is not a plain SQL identifier`,
        'use lower-case letters, digits and _',
      );
    if (!options.pool && !options.connectionString)
      throw configInvalid('the PostgreSQL blob store needs a pool or a connection string', 'set DATABASE_URL');
    const pool = options.pool ?? new pg.Pool({ connectionString: options.connectionString, max: 4 });
    const store = new PgBlobStore(pool, !options.pool, table, options);
    try {
      await store.migrate();
    } catch (e) {
      if (store.ownsPool) await pool.end();
      throw e;
    }
    return store;
  }

  private async migrate(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      // concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog: serialize it
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ndif-blobstore:${this.table}`]);
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.table} (
        ref text PRIMARY KEY,
        loid oid NOT NULL,
        size bigint NOT NULL,
        sha256 text NOT NULL,
        content_type text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }

  async put(bytes: Uint8Array, options?: PutOptions): Promise<BlobInfo> {
    const { contentType } = checkPut(bytes, options, this.maxBytes);
    const info: BlobInfo = { ref: newRef(), size: bytes.byteLength, sha256: sha256(bytes), contentType };
    await this.pool.query(
      `INSERT INTO ${this.table} (ref, loid, size, sha256, content_type) VALUES ($1, lo_from_bytea(0, $2), $3, $4, $5)`,
      [info.ref, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), info.size, info.sha256, contentType],
    );
    return info;
  }

  async head(ref: string): Promise<BlobInfo | undefined> {
    checkRef(ref);
    const r = await this.pool.query<Row>(`SELECT ref, size, sha256, content_type FROM ${this.table} WHERE ref = $1`, [
      ref,
    ]);
    return r.rows[0] ? toInfo(r.rows[0]) : undefined;
  }

  async get(ref: string, options: GetOptions = {}): Promise<StoredBlob> {
    checkRef(ref);
    const r = await this.pool.query<Row>(
      `SELECT ref, size, sha256, content_type, lo_get(loid) AS bytes FROM ${this.table} WHERE ref = $1`,
      [ref],
    );
    const row = r.rows[0];
    if (!row) throw blobNotFound(ref);
    const info = toInfo(row);
    const bytes = row.bytes ?? Buffer.alloc(0);
    const actual = { size: bytes.byteLength, sha256: options.sha256 === false ? info.sha256 : sha256(bytes) };
    if (actual.size !== info.size || actual.sha256 !== info.sha256) throw blobCorrupt(ref, info, actual);
    return { ...info, bytes };
  }

  async delete(ref: string): Promise<boolean> {
    checkRef(ref);
    const r = await this.pool.query(
      `WITH gone AS (DELETE FROM ${this.table} WHERE ref = $1 RETURNING loid) SELECT lo_unlink(loid) FROM gone`,
      [ref],
    );
    return (r.rowCount ?? 0) > 0;
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }
}
