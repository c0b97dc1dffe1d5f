// The API key store port; adapters: SQLite (sqlite.ts, embedded) and PostgreSQL (postgres.ts, distributed).
// Records hold the secret's hash only.

export interface KeyTags {
  /** Blocks run in the agent's process; otherwise in the sandbox. */
  trusted: boolean;
  /** Requests go to the priority ranks of the queue. */
  priority: boolean;
  /** Operator routes: deploy, scale, evict, pin, kill, drain, keys; reading any request. */
  operator: boolean;
}

export interface StoredApiKey {
  id: string;
  /** Lowercase hex sha256 of the secret. */
  hash: string;
  label: string;
  tags: KeyTags;
  createdAt: string;
  createdBy: string;
  revokedAt: string | null;
  revokedBy: string | null;
}

export interface ApiKeyStore {
  readonly kind: 'sqlite' | 'postgres';
  /** Adds a key; rejects when the id exists. */
  insert(key: StoredApiKey): Promise<void>;
  get(id: string): Promise<StoredApiKey | undefined>;
  /** Every key, oldest first. */
  list(): Promise<StoredApiKey[]>;
  /** Marks a key revoked (keeping the first revocation); the record afterwards, undefined when there is none. */
  revoke(id: string, at: string, by: string): Promise<StoredApiKey | undefined>;
  /** Throws when the store cannot answer (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
