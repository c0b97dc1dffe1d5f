// API key text: the format, the secret's hash, constant-time matching, and what a malformed key is told.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { hashSecret, newKey, parseKey, secretMatches } from '../../auth/key-format.js';

it('a new key parses back to its id and a secret whose hash is the one to store', () => {
  const k = newKey();
  assert.match(k.key, /^ndif_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
  const p = parseKey(k.key);
  assert.ok(!('error' in p));
  assert.equal(p.id, k.id);
  assert.equal(hashSecret(p.secret), k.hash);
  assert.ok(secretMatches(p.secret, k.hash));
  assert.ok(!k.key.includes(k.hash), 'the stored hash is not part of the key');
});

it('two keys share nothing', () => {
  const a = newKey();
  const b = newKey();
  assert.notEqual(a.id, b.id);
  assert.notEqual(a.hash, b.hash);
});

it('a wrong secret does not match; a stored hash of another length does not match', () => {
  const k = newKey();
  const other = newKey();
  const p = parseKey(other.key) as { secret: string };
  assert.equal(secretMatches(p.secret, k.hash), false);
  assert.equal(secretMatches(p.secret, 'abcd'), false);
});

it('malformed keys say why without echoing the secret', () => {
  for (const text of [
    '',
    'hello',
    'ndif_123_abc',
    `ndif_${'0'.repeat(16)}_${'a'.repeat(42)}`,
    `ndif_${'G'.repeat(16)}_${'a'.repeat(43)}`,
    'x'.repeat(500),
  ]) {
    const p = parseKey(text);
    assert.ok('error' in p, text);
    assert.ok(!p.error.includes('aaaa'), p.error);
  }
});
