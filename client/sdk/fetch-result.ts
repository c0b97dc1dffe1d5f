// Gets a finished request's result container, as it came (a binary websocket frame), inline (base64 in the status
// message or GET /requests/:id) or from its signed download URL, checks its sha256 and decodes it.
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
}

export async function fetchResult(
  http: FabricHttp,
  requestId: string,
  ref: ResultPointer,
  signal?: AbortSignal,
): Promise<DecodedResult> {
  let bytes: Uint8Array;
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
