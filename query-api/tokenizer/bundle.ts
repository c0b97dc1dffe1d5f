// A model's tokenizer as the SDK fetches it (GET /models/:key/tokenizer): tokenizer.json and
// tokenizer_config.json as text, with the sha256 the client checks them by (protocol/tokenizer-bundle.ts).
// The reply's bytes are made once per version of the folder's files (folderStamp, catalog/fingerprint.ts) and
// kept as one Buffer: made from the file's bytes without decoding them to a string or stringifying a bundle
// object (a 35 MB tokenizer costs ~35 MB kept, ~70 MB while it is made), and at most once at a time per model
// however many cold requests arrive together (single flight). A tokenizer.json that is not a regular file or is
// over NDIF_TOKENIZER_MAX_BYTES (catalog/model-files.ts) is refused with its code, never read.
import { createHash } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { folderStamp } from '../../catalog/fingerprint.js';
import { type ModelFileLimits, modelFileLimitsFromEnv, readModelFile } from '../../catalog/model-files.js';
import type { ModelEntry } from '../../catalog/port.js';
import { FabricError } from '../../protocol/errors.js';
import { tokenizerBundleSha256 } from '../../protocol/tokenizer-bundle.js';

export interface PreparedTokenizer {
  sha256: string;
  /** The reply: the TokenizerBundle as JSON, UTF-8. */
  body: Buffer;
}

/** The length of `src` (UTF-8 text) as a JSON string literal, quotes included. */
function jsonStringSize(src: Buffer): number {
  let size = 2;
  for (let i = 0; i < src.length; i++) {
    const b = src[i]!;
    size +=
      b === 0x22 || b === 0x5c || b === 0x0a || b === 0x0d || b === 0x09 || b === 0x08 || b === 0x0c
        ? 2
        : b < 0x20
          ? 6
          : 1;
  }
  return size;
}

/** Writes `src` as a JSON string literal into `out` at `o` (escaped as JSON.stringify escapes); returns the end. */
function writeJsonString(src: Buffer, out: Buffer, at: number): number {
  let o = at;
  out[o++] = 0x22;
  let run = 0;
  for (let i = 0; i < src.length; i++) {
    const b = src[i]!;
    if (b >= 0x20 && b !== 0x22 && b !== 0x5c) continue;
    o += src.copy(out, o, run, i);
    run = i + 1;
    out[o++] = 0x5c;
    if (b === 0x22 || b === 0x5c) out[o++] = b;
    else if (b === 0x0a) out[o++] = 0x6e;
    else if (b === 0x0d) out[o++] = 0x72;
    else if (b === 0x09) out[o++] = 0x74;
    else if (b === 0x08) out[o++] = 0x62;
    else if (b === 0x0c) out[o++] = 0x66;
    else o += out.write(`u${b.toString(16).padStart(4, '0')}`, o, 'latin1');
  }
  o += src.copy(out, o, run, src.length);
  out[o++] = 0x22;
  return o;
}

/** `src` (UTF-8 text) as a JSON string literal's UTF-8 bytes. */
export function jsonStringBytes(src: Buffer): Buffer {
  const out = Buffer.allocUnsafe(jsonStringSize(src));
  writeJsonString(src, out, 0);
  return out;
}

/** One Buffer of `parts`: text as is, Buffers as JSON string literals; written in place, no copies in between. */
function jsonBody(parts: Array<string | Buffer>): Buffer {
  const size = parts.reduce((n, p) => n + (typeof p === 'string' ? Buffer.byteLength(p) : jsonStringSize(p)), 0);
  const out = Buffer.allocUnsafe(size);
  let o = 0;
  for (const p of parts) o = typeof p === 'string' ? o + out.write(p, o) : writeJsonString(p, out, o);
  return out;
}

export class TokenizerBundles {
  private readonly ready = new Map<string, { fingerprint: string; prepared: Promise<PreparedTokenizer> }>();

  constructor(private readonly limits: ModelFileLimits = modelFileLimitsFromEnv()) {}

  /** The prepared reply of `entry`; throws API_NO_TOKENIZER when the folder has no tokenizer.json. */
  get(entry: ModelEntry): Promise<PreparedTokenizer> {
    const fingerprint = folderStamp(entry.dir);
    const hit = this.ready.get(entry.key);
    if (hit !== undefined && hit.fingerprint === fingerprint) return hit.prepared;
    const prepared = this.prepare(entry);
    this.ready.set(entry.key, { fingerprint, prepared });
    // A failure is not kept: the next request tries again (the folder may have been fixed).
    prepared.catch(() => {
      if (this.ready.get(entry.key)?.prepared === prepared) this.ready.delete(entry.key);
    });
    return prepared;
  }

  private async prepare(entry: ModelEntry): Promise<PreparedTokenizer> {
    const tokenizer = await readModelFile(entry.dir, 'tokenizer.json', this.limits);
    if (tokenizer === undefined) {
      throw new FabricError(
        'API_NO_TOKENIZER',
        404,
        `model ${entry.key} has no tokenizer (no tokenizer.json in its folder)`,
        {
          hint: 'send token ids instead of text for this model, or add its tokenizer.json to the model folder',
          details: { model: entry.key },
        },
      );
    }
    const config = await readModelFile(entry.dir, 'tokenizer_config.json', this.limits);
    if (!isUtf8(tokenizer) || (config !== undefined && !isUtf8(config))) {
      // Not UTF-8: the bundle carries the text as decoded (replacement characters), hashed as such.
      const t = tokenizer.toString('utf8');
      const c = config === undefined ? null : config.toString('utf8');
      const sha256 = await tokenizerBundleSha256(t, c);
      return { sha256, body: Buffer.from(JSON.stringify({ model: entry.key, sha256, tokenizer: t, config: c })) };
    }
    const h = createHash('sha256').update(tokenizer).update('\0');
    if (config !== undefined) h.update(config);
    const sha256 = h.digest('hex');
    const body = jsonBody([
      `{"model":${JSON.stringify(entry.key)},"sha256":"${sha256}","tokenizer":`,
      tokenizer,
      ',"config":',
      config ?? 'null',
      '}',
    ]);
    return { sha256, body };
  }
}
