// API keys: `ndif_<id>_<secret>`. The id (16 hex digits) is public and names the caller; the secret (32 random
// bytes, base64url) is never stored: the store keeps its sha256, compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const KEY = /^ndif_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;
export const KEY_ID = /^[0-9a-f]{16}$/;

export interface ParsedKey {
  id: string;
  secret: string;
}

/** Splits a presented key, or returns why it is not one (never echoing the secret). */
export function parseKey(text: string): ParsedKey | { error: string } {
  const m = KEY.exec(text);
  if (m !== null) return { id: m[1]!, secret: m[2]! };
  if (!text.startsWith('ndif_')) return { error: 'it does not start with ndif_' };
  if (text.length > 200) return { error: `it is ${text.length} characters long` };
  return { error: 'it is not ndif_<16 hex digits>_<43 base64url characters>' };
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison of a presented secret against a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** A fresh key: its id, the text handed to the user once, and the hash to store. */
export function newKey(): { id: string; key: string; hash: string } {
  const id = randomBytes(8).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  return { id, key: `ndif_${id}_${secret}`, hash: hashSecret(secret) };
}
