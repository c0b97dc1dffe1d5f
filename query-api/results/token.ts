// Signed result download tokens: `<expiresAtMs>.<base64url HMAC-SHA256(secret, requestId \n resultRef \n expiresAtMs)>`.
// The signature is checked before the expiry, so a forged token is called forged whatever time it claims.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { FabricError } from '../../protocol/errors.js';

function mac(secret: Buffer, requestId: string, ref: string, expiresAtMs: number): Buffer {
  return createHmac('sha256', secret).update(`${requestId}\n${ref}\n${expiresAtMs}`).digest();
}

export function signResultToken(secret: Buffer, requestId: string, ref: string, expiresAtMs: number): string {
  return `${expiresAtMs}.${mac(secret, requestId, ref, expiresAtMs).toString('base64url')}`;
}

const TOKEN = /^([1-9][0-9]{0,15})\.([A-Za-z0-9_-]{43})$/;

function invalid(requestId: string, why: string): FabricError {
  return new FabricError(
    'RESULT_TOKEN_INVALID',
    403,
    `the download token is not valid for request ${requestId}: ${why}`,
    {
      hint: "use the URL from the request's COMPLETED status or GET /requests/:id (it carries a fresh token)",
      details: { requestId },
    },
  );
}

/** Throws RESULT_TOKEN_INVALID (malformed, forged, another request or result) or RESULT_TOKEN_EXPIRED. */
export function verifyResultToken(secret: Buffer, token: string, requestId: string, ref: string, nowMs: number): void {
  const m = TOKEN.exec(token);
  if (m === null) throw invalid(requestId, 'it is not <expiry>.<signature>');
  const expiresAtMs = Number(m[1]);
  const given = Buffer.from(m[2]!, 'base64url');
  const expected = mac(secret, requestId, ref, expiresAtMs);
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw invalid(requestId, 'the signature does not match');
  if (nowMs >= expiresAtMs) {
    const expiredAt = new Date(expiresAtMs).toISOString();
    throw new FabricError(
      'RESULT_TOKEN_EXPIRED',
      403,
      `the download token for request ${requestId} expired at ${expiredAt}`,
      {
        hint: 'GET /requests/:id again for a new URL',
        details: { requestId, expiredAt },
      },
    );
  }
}
