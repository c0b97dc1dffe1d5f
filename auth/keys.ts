// The API key service: creates keys (the secret shown once), authenticates a presented key against its stored
// hash, lists and revokes. Any failure of the store while authenticating is AUTH_STORE_UNAVAILABLE: the API
// fails closed.
import { FabricError } from '../protocol/errors.js';
import { keyMalformed, keyNotFound, keyRevoked, keyUnknown, storeUnavailable } from './errors.js';
import { hashSecret, KEY_ID, newKey, parseKey, secretMatches } from './key-format.js';
import type { ApiKeyStore, KeyTags, StoredApiKey } from './port.js';

/** Who is calling, as the APIs see it. */
export interface Identity {
  /** Recorded as the actor of every command: `key:<id>`, or `local` with auth off. */
  actor: string;
  keyId: string | null;
  label: string;
  tags: KeyTags;
  /** False when auth is off. */
  auth: boolean;
}

/** The caller when auth is off: every tag but priority. */
export const LOCAL_IDENTITY: Identity = Object.freeze({
  actor: 'local',
  keyId: null,
  label: 'local (auth off)',
  tags: Object.freeze({ trusted: true, priority: false, operator: true }),
  auth: false,
});

export const actorOfKey = (id: string): string => `key:${id}`;

export interface KeySummary {
  id: string;
  label: string;
  tags: KeyTags;
  createdAt: string;
  createdBy: string;
  revokedAt: string | null;
}

const summary = (k: StoredApiKey): KeySummary => ({
  id: k.id,
  label: k.label,
  tags: k.tags,
  createdAt: k.createdAt,
  createdBy: k.createdBy,
  revokedAt: k.revokedAt,
});

export class ApiKeys {
  constructor(readonly store: ApiKeyStore) {}

  async authenticate(presented: string): Promise<Identity> {
    const parsed = parseKey(presented);
    if ('error' in parsed) throw keyMalformed(parsed.error);
    let record: StoredApiKey | undefined;
    try {
      record = await this.store.get(parsed.id);
    } catch (e) {
      throw storeUnavailable(e);
    }
    if (record === undefined || !secretMatches(parsed.secret, record.hash)) throw keyUnknown(parsed.id);
    if (record.revokedAt !== null) throw keyRevoked(record.id, record.revokedAt);
    return { actor: actorOfKey(record.id), keyId: record.id, label: record.label, tags: record.tags, auth: true };
  }

  async create(
    input: { label: string; tags: KeyTags },
    by: string,
    at: string,
  ): Promise<{ key: string; summary: KeySummary }> {
    const k = newKey();
    const record: StoredApiKey = {
      id: k.id,
      hash: k.hash,
      label: input.label,
      tags: { ...input.tags },
      createdAt: at,
      createdBy: by,
      revokedAt: null,
      revokedBy: null,
    };
    await this.store.insert(record);
    return { key: k.key, summary: summary(record) };
  }

  async list(): Promise<KeySummary[]> {
    return (await this.store.list()).map(summary);
  }

  async revoke(id: string, by: string, at: string): Promise<KeySummary> {
    if (!KEY_ID.test(id)) throw keyNotFound(id);
    const r = await this.store.revoke(id, at, by);
    if (r === undefined) throw keyNotFound(id);
    return summary(r);
  }

  /**
   * Makes sure a key given as text (e.g. NDIF_BOOTSTRAP_KEY) exists, with the operator and trusted tags, so the
   * first operator can create the others. A key whose id exists with another secret is refused.
   */
  async ensureBootstrapKey(keyText: string, at: string): Promise<KeySummary> {
    const parsed = parseKey(keyText);
    if ('error' in parsed) throw keyMalformed(`the bootstrap key: ${parsed.error}`);
    const existing = await this.store.get(parsed.id);
    if (existing !== undefined) {
      if (!secretMatches(parsed.secret, existing.hash)) {
        throw new FabricError(
          'AUTH_INVALID_KEY_RECORD',
          500,
          `the bootstrap key's id ${parsed.id} is taken by another key`,
          { hint: 'generate a new bootstrap key' },
        );
      }
      return summary(existing);
    }
    const record: StoredApiKey = {
      id: parsed.id,
      hash: hashSecret(parsed.secret),
      label: 'bootstrap operator',
      tags: { trusted: true, priority: false, operator: true },
      createdAt: at,
      createdBy: 'system:bootstrap',
      revokedAt: null,
      revokedBy: null,
    };
    await this.store.insert(record);
    return summary(record);
  }
}
