// Gets a finished request's result container, as it came (a binary websocket frame), inline (base64 in the status
// message or GET /requests/:id), downloaded while the agent wrote it (RESULT_WRITING) or from its signed download URL,
// checks its sha256 and decodes it.
import { createHash } from 'node:crypto';
import { ProtocolError } from './errors.js';
import type { FabricHttp } from './http.js';
import { decodeResult } from './results.js';
import type { DecodedResult } from './results.js';

export interface ResultPointer {
  bytes?: number;
  sha256?: string;
  inline?: string;
  url?: string;
  /** The container's bytes as they came (a binary websocket frame). */
  resultBytes?: Uint8Array;
  /** Its download begun while it was written; undefined when that failed (then it is read by `url`). */
  early?: Promise<Uint8Array | undefined>;
}

/** A result's download begun at its RESULT_WRITING, for the attempt that writes it. */
export interface EarlyResult {
  attempt: number | undefined;
  bytes: Promise<Uint8Array | undefined>;
}

/**
 * Starts reading the result the agent is writing. A read that fails (the attempt ended without it, the connection
 * dropped) gives undefined: the COMPLETED that follows is read the usual way.
 */
export function downloadEarly(http: FabricHttp, m: { url?: string; attempt?: number }): EarlyResult {
  const url = m.url!;
  const bytes = http
    .call<Uint8Array>('GET', url, { binary: true, auth: !url.includes('token=') })
    .then((r) => r.body as Uint8Array | undefined)
    .catch(() => undefined);
  return { attempt: m.attempt, bytes };
}

/** The early download a COMPLETED may use: only one it says it streamed, of its own attempt. */
export function earlyFor(
  m: { streamed?: boolean; attempt?: number },
  early: EarlyResult | undefined,
): { early?: Promise<Uint8Array | undefined> } {
  return m.streamed === true && early !== undefined && early.attempt === m.attempt ? { early: early.bytes } : {};
}

/** The early bytes, when they are the whole result its COMPLETED describes. */
async function earlyBytes(ref: ResultPointer): Promise<Uint8Array | undefined> {
  const got = await ref.early;
  if (got === undefined || (ref.bytes !== undefined && got.byteLength !== ref.bytes)) return undefined;
  if (ref.sha256 !== undefined && createHash('sha256').update(got).digest('hex') !== ref.sha256) return undefined;
  return got;
}

export async function fetchResult(
  http: FabricHttp,
  requestId: string,
  ref: ResultPointer,
  signal?: AbortSignal,
): Promise<DecodedResult> {
  let bytes: Uint8Array;
  const early = ref.early === undefined ? undefined : await earlyBytes(ref);
  if (early !== undefined) return decodeResult(early);
  if (ref.resultBytes !== undefined) {
    bytes = ref.resultBytes;
    if (ref.bytes !== undefined && bytes.byteLength !== ref.bytes)
      throw new ProtocolError(
        `the result of request ${requestId} came with ${bytes.byteLength} bytes where its status says ${ref.bytes}`,
      );
  } else if (typeof ref.inline === 'string') {
    const b = Buffer.from(ref.inline, 'base64');
    bytes = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  } else if (typeof ref.url === 'string') {
    // The signed URL is the credential; relative to the API's base.
    bytes = (
      await http.call<Uint8Array>('GET', ref.url, {
        binary: true,
        auth: !ref.url.includes('token='),
        ...(signal ? { signal } : {}),
      })
    ).body;
  } else {
    bytes = (
      await http.call<Uint8Array>('GET', `/requests/${encodeURIComponent(requestId)}/result`, {
        binary: true,
        ...(signal ? { signal } : {}),
      })
    ).body;
  }
  if (ref.sha256) {
    const got = createHash('sha256').update(bytes).digest('hex');
    if (got !== ref.sha256)
      throw new ProtocolError(
        `the result of request ${requestId} does not match its sha256 (expected ${ref.sha256}, got ${got}, ${bytes.byteLength} bytes)`,
      );
  }
  return decodeResult(bytes);
}
