// API keys in a SQLite file (the embedded fabric), through better-sqlite3.
import Database from 'better-sqlite3';
import { limitsFromText, limitsToText, type ApiKeyStore, type KeyTags, type StoredApiKey } from './port.js';
import { enableWal } from '../protocol/sqlite-wal.js';

export interface SqliteApiKeyStoreOptions {
  /** Database file (created when missing), or ':memory:'. */
  path: string;
}

type Row = {
  id: string;
  hash: string;
  label: string;
  trusted: number;
  priority: number;
  operator: number;
  created_at: string;
  created_by: string;
  revoked_at: string | null;
  revoked_by: string | null;
  limits: string | null;
};

function tagsOf(r: Row): KeyTags {
  const tags: KeyTags = { trusted: r.trusted === 1, priority: r.priority === 1, operator: r.operator === 1 };
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

export class SqliteApiKeyStore implements ApiKeyStore {
  readonly kind = 'sqlite' as const;
  readonly db: Database.Database;
  private readonly getStmt: Database.Statement<[string], Row>;

  constructor(options: SqliteApiKeyStoreOptions) {
    this.db = new Database(options.path);
    this.db.pragma('busy_timeout = 5000');
    enableWal(this.db, 5000);
    this.db.exec(`CREATE TABLE IF NOT EXISTS api_keys (
      id TEXT PRIMARY KEY, hash TEXT NOT NULL, label TEXT NOT NULL,
      trusted INTEGER NOT NULL, priority INTEGER NOT NULL, operator INTEGER NOT NULL,
      created_at TEXT NOT NULL, created_by TEXT NOT NULL, revoked_at TEXT, revoked_by TEXT, limits TEXT)`);
    // Files written before keys had limit tags gain the column (NULL: the fabric's defaults).
    const columns = this.db.prepare('PRAGMA table_info(api_keys)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'limits')) this.db.exec('ALTER TABLE api_keys ADD COLUMN limits TEXT');
    this.getStmt = this.db.prepare('SELECT * FROM api_keys WHERE id = ?');
  }

  async insert(k: StoredApiKey): Promise<void> {
    this.db
      .prepare(
        'INSERT INTO api_keys (id, hash, label, trusted, priority, operator, created_at, created_by, revoked_at, revoked_by, limits) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
        k.id,
        k.hash,
        k.label,
        k.tags.trusted ? 1 : 0,
        k.tags.priority ? 1 : 0,
        k.tags.operator ? 1 : 0,
        k.createdAt,
        k.createdBy,
        k.revokedAt,
        k.revokedBy,
        limitsToText(k.tags.limits),
      );
  }

  async get(id: string): Promise<StoredApiKey | undefined> {
    const r = this.getStmt.get(id);
    return r === undefined ? undefined : toKey(r);
  }

  async list(): Promise<StoredApiKey[]> {
    return (this.db.prepare('SELECT * FROM api_keys ORDER BY created_at, id').all() as Row[]).map(toKey);
  }

  async revoke(id: string, at: string, by: string): Promise<StoredApiKey | undefined> {
    this.db
      .prepare('UPDATE api_keys SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL')
      .run(at, by, id);
    return this.get(id);
  }

  async ping(): Promise<void> {
    this.db.prepare('SELECT 1').get();
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
