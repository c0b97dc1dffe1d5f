// Reads the API key a call presents (Authorization: Bearer, x-api-key, or ?key= on websocket upgrades) and turns
// it into the caller's identity. With auth off every caller is `local`.
import type { IncomingHttpHeaders } from 'node:http';
import type { ApiKeys, Identity } from '../auth/keys.js';
import { LOCAL_IDENTITY } from '../auth/keys.js';
import { keyMalformed, keyMissing, noKeyStore } from '../auth/errors.js';

/** The key text sent with a call, undefined when none; throws AUTH_KEY_MALFORMED for a header of the wrong shape. */
export function presentedKey(headers: IncomingHttpHeaders, queryKey?: string): string | undefined {
  const auth = headers.authorization;
  const x = headers['x-api-key'];
  let fromAuth: string | undefined;
  if (auth !== undefined && auth !== '') {
    const m = /^Bearer[ ]+(\S+)$/i.exec(auth);
    if (m === null) throw keyMalformed('the Authorization header is not "Bearer <key>"');
    fromAuth = m[1];
  }
  const fromX = Array.isArray(x) ? x.join(',') : x === '' ? undefined : x;
  const candidates = [fromAuth, fromX, queryKey === '' ? undefined : queryKey].filter(
    (k): k is string => k !== undefined,
  );
  if (candidates.length === 0) return undefined;
  if (candidates.some((k) => k !== candidates[0]))
    throw keyMalformed('different keys were sent in Authorization, x-api-key and ?key=');
  return candidates[0];
}

export async function identify(
  auth: boolean,
  keys: ApiKeys | undefined,
  key: string | undefined,
  optional: boolean,
): Promise<Identity | null> {
  if (!auth) return LOCAL_IDENTITY;
  if (key === undefined) {
    if (optional) return null;
    throw keyMissing();
  }
  if (keys === undefined) throw noKeyStore();
  return keys.authenticate(key);
}
