// The API key store port; adapters: SQLite (sqlite.ts, embedded) and PostgreSQL (postgres.ts, distributed).
// Records hold the secret's hash only.

export interface KeyTags {
  /** Blocks run in the agent's process; otherwise in the sandbox. */
  trusted: boolean;
  /** Requests go to the priority ranks of the queue. */
  priority: boolean;
  /** Operator routes: deploy, scale, evict, pin, kill, drain, keys; reading any request. */
  operator: boolean;
  /** This key's own limits (each one absent: the fabric's default, docs/http-api.md "Per-key limits"). */
  limits?: KeyLimits;
}

/** What one key may use; set per key by its limit tags, else the fabric's defaults. */
export interface KeyLimits {
  /** Longest execution limit (timeoutMs) its requests may ask for or get. */
  maxTimeoutMs?: number;
  /** Requests it may have waiting in the queues at once. */
  maxQueued?: number;
  /** Requests it may have running at once (more wait; others pass them in the queue). */
  maxRunning?: number;
  /** Bytes of results it may keep stored (new requests are refused above it). */
  storageQuotaBytes?: number;
}

export const KEY_LIMIT_NAMES = ['maxTimeoutMs', 'maxQueued', 'maxRunning', 'storageQuotaBytes'] as const;

/** The limit tags as stored (JSON text), or null when the key has none of its own. */
export function limitsToText(l: KeyLimits | undefined): string | null {
  if (l === undefined) return null;
  const own = Object.fromEntries(KEY_LIMIT_NAMES.filter((k) => l[k] !== undefined).map((k) => [k, l[k]]));
  return Object.keys(own).length === 0 ? null : JSON.stringify(own);
}

export function limitsFromText(t: string | null | undefined): KeyLimits | undefined {
  if (t === null || t === undefined || t === '') return undefined;
  return JSON.parse(t) as KeyLimits;
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
