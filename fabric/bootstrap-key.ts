// The first operator key of a fabric with auth on: NDIF_BOOTSTRAP_KEY (a key text, e.g. from `ndif keys new`)
// is made to exist in the key store with the operator and trusted tags when an API process starts. It is
// idempotent (the same text again changes nothing) and safe for processes starting together on one store.
import type { Logger } from 'pino';
import type { ApiKeyStore } from '../auth/port.js';
import { ApiKeys, type KeySummary } from '../auth/keys.js';

async function ensureBootstrapKeyFromEnv(
  env: NodeJS.ProcessEnv,
  store: ApiKeyStore,
  at: string,
): Promise<KeySummary | undefined> {
  const text = env.NDIF_BOOTSTRAP_KEY?.trim();
  if (!text) return undefined;
  const keys = new ApiKeys(store);
  try {
    return await keys.ensureBootstrapKey(text, at);
  } catch (e) {
    // Another process inserted it between our read and our insert: the second look finds it.
    if (
      (e as { code?: string }).code?.startsWith('AUTH_KEY_') ||
      (e as { code?: string }).code === 'AUTH_INVALID_KEY_RECORD'
    )
      throw e;
    return keys.ensureBootstrapKey(text, at);
  }
}

/** At an API process's start: the bootstrap key stored and logged, or a warning when auth is on and no key exists. */
export async function prepareKeys(
  env: NodeJS.ProcessEnv,
  store: ApiKeyStore,
  auth: boolean,
  log: Logger,
): Promise<void> {
  const bootstrap = await ensureBootstrapKeyFromEnv(env, store, new Date().toISOString());
  if (bootstrap)
    log.info(
      { keyId: bootstrap.id },
      `bootstrap operator key ${bootstrap.id} (NDIF_BOOTSTRAP_KEY) is in the key store`,
    );
  else if (auth && (await store.list()).length === 0) {
    log.warn(
      'auth is on and the key store has no key: set NDIF_BOOTSTRAP_KEY (make one with `ndif keys new`) to create the first operator key',
    );
  }
}
