// Errors of authentication and the API key store; codes are listed in docs/errors.md ("Command API and query API").
import { FabricError } from '../protocol/errors.js';

export const AuthErrorCode = {
  missing: 'AUTH_KEY_MISSING',
  malformed: 'AUTH_KEY_MALFORMED',
  unknown: 'AUTH_KEY_UNKNOWN',
  revoked: 'AUTH_KEY_REVOKED',
  storeUnavailable: 'AUTH_STORE_UNAVAILABLE',
  operatorRequired: 'AUTH_OPERATOR_REQUIRED',
  keyNotFound: 'AUTH_KEY_NOT_FOUND',
  noKeyStore: 'AUTH_NO_KEY_STORE',
  invalidKey: 'AUTH_INVALID_KEY_RECORD',
} as const;

export function keyMissing(): FabricError {
  return new FabricError(AuthErrorCode.missing, 401, 'this call needs an API key and none was sent', {
    hint: 'send it as "Authorization: Bearer ndif_<id>_<secret>" or "x-api-key: ndif_<id>_<secret>"; an operator creates keys with `ndif keys create`',
  });
}

export function keyMalformed(why: string): FabricError {
  return new FabricError(AuthErrorCode.malformed, 400, `the API key is malformed: ${why}`, {
    hint: 'a key looks like ndif_<16 hex digits>_<43 base64url characters>, sent as "Authorization: Bearer <key>" or "x-api-key: <key>"',
  });
}

export function keyUnknown(id: string): FabricError {
  return new FabricError(
    AuthErrorCode.unknown,
    403,
    `API key ${id} is not known (no such key, or its secret is wrong)`,
    {
      hint: 'check the key you were given; an operator lists keys with `ndif keys list`',
      details: { keyId: id },
    },
  );
}

export function keyRevoked(id: string, revokedAt: string): FabricError {
  return new FabricError(AuthErrorCode.revoked, 403, `API key ${id} was revoked at ${revokedAt}`, {
    hint: 'ask an operator for a new key',
    details: { keyId: id, revokedAt },
  });
}

export function storeUnavailable(cause: unknown): FabricError {
  const why = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
  return new FabricError(
    AuthErrorCode.storeUnavailable,
    503,
    `the API key store cannot be reached (${why}); no call is served until it answers`,
    {
      hint: 'check the key store (the SQLite file or the PostgreSQL server) and try again',
      cause,
    },
  );
}

export function operatorRequired(actor: string): FabricError {
  return new FabricError(
    AuthErrorCode.operatorRequired,
    403,
    `this is an operator route and ${actor} has no operator tag`,
    {
      hint: 'use a key created with the operator tag (`ndif keys create --operator`)',
      details: { actor },
    },
  );
}

export function keyNotFound(id: string): FabricError {
  return new FabricError(AuthErrorCode.keyNotFound, 404, `there is no API key ${JSON.stringify(id)}`, {
    hint: 'list keys with GET /keys',
    details: { keyId: id },
  });
}

export function noKeyStore(): FabricError {
  return new FabricError(
    AuthErrorCode.noKeyStore,
    503,
    'this server was started without an API key store, so keys cannot be created, listed or revoked',
    {
      hint: 'start the fabric with a key store (NDIF_KEYS_DB or DATABASE_URL)',
    },
  );
}
