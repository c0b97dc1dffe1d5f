// Issue 20, finding 2: 8 parallel cold fetches of a large tokenizer each read and stringified the file again
// until the fabric died of heap exhaustion. The reply is now made once per version of the folder's files, as one
// Buffer, whatever the number of requests arriving together; its JSON is the TokenizerBundle the SDK checks (same
// sha256 as protocol/tokenizer-bundle.ts); a tokenizer.json over the cap or not a regular file is refused unread.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelEntry } from '../../catalog/port.js';
import { tokenizerBundleSha256, type TokenizerBundle } from '../../protocol/tokenizer-bundle.js';
import { TokenizerBundles, jsonStringBytes } from '../../query-api/tokenizer/bundle.js';

let tmp: string;
before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'ndif-tokenizer-bundle-'));
});
after(() => rmSync(tmp, { recursive: true, force: true }));

const entry = (key: string, dir: string): ModelEntry => ({
  key,
  dir,
  description: key,
  weightsBytes: 0,
  defaults: { gpus: 1, dtype: 'float32' },
});

describe('the tokenizer reply', () => {
  it('16 parallel cold requests share one prepared reply whose JSON is the bundle with the protocol’s sha256', async () => {
    const dir = join(tmp, 'big');
    execFileSync('mkdir', ['-p', dir]);
    // ~8 MB of vocabulary with quotes, backslashes, control characters and non-ASCII text.
    const vocab: Record<string, number> = {};
    for (let i = 0; i < 200_000; i++) vocab[`tok"\\\n\t\u0001é漢${i}`] = i;
    const text = JSON.stringify({ version: '1.0', model: { type: 'BPE', vocab } });
    writeFileSync(join(dir, 'tokenizer.json'), text);
    writeFileSync(join(dir, 'tokenizer_config.json'), '{"padding_side":"left"}');
    const bundles = new TokenizerBundles();
    const e = entry('big', dir);
    const all = await Promise.all(Array.from({ length: 16 }, () => bundles.get(e)));
    for (const p of all) assert.equal(p, all[0], 'one prepared reply for every request');
    assert.ok(Buffer.isBuffer(all[0]!.body));
    const parsed = JSON.parse(all[0]!.body.toString('utf8')) as TokenizerBundle;
    assert.equal(parsed.tokenizer, text);
    assert.equal(parsed.config, '{"padding_side":"left"}');
    assert.equal(parsed.model, 'big');
    assert.equal(parsed.sha256, await tokenizerBundleSha256(text, parsed.config));
    assert.equal(all[0]!.sha256, parsed.sha256);
    assert.equal(await bundles.get(e), all[0], 'kept while the files do not change');
  });

  it('JSON string bytes equal JSON.stringify for every byte below 0x80 and for UTF-8 text', () => {
    const all = `${String.fromCharCode(...Array.from({ length: 128 }, (_, i) => i))}é漢\u2028😀`;
    assert.equal(jsonStringBytes(Buffer.from(all)).toString('utf8'), JSON.stringify(all));
  });

  it('a tokenizer.json over the cap, or a FIFO, is refused without being read', async () => {
    const big = join(tmp, 'huge');
    execFileSync('mkdir', ['-p', big]);
    writeFileSync(join(big, 'tokenizer.json'), '');
    truncateSync(join(big, 'tokenizer.json'), 65 * 1024 * 1024);
    const fifo = join(tmp, 'fifo');
    execFileSync('mkdir', ['-p', fifo]);
    execFileSync('mkfifo', [join(fifo, 'tokenizer.json')]);
    const bundles = new TokenizerBundles();
    await assert.rejects(bundles.get(entry('huge', big)), { code: 'CATALOG_MODEL_FILE_TOO_LARGE' });
    await assert.rejects(bundles.get(entry('fifo', fifo)), { code: 'CATALOG_MODEL_FILE_NOT_REGULAR' });
  });
});
