// Frames of the IPC transport on a Unix socket: [u32 LE frame length][u32 LE header length][header JSON][body].
// The frame length counts everything after itself. The body holds message values back to back, each header
// entry giving its value's byte length `n`, so values travel raw (no base64, no JSON escaping).
import type { Socket } from 'node:net';

/** One frame at most (a batch of up to 1000 messages of up to 1 MB each fits). */
export const MAX_IPC_FRAME_BYTES = 1 << 30;

export interface Frame {
  header: Record<string, unknown>;
  body: Buffer;
}

export class IpcFrameError extends Error {}

export function encodeFrame(header: object, values: readonly Uint8Array[] = []): Buffer[] {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  let bodyBytes = 0;
  for (const v of values) bodyBytes += v.byteLength;
  const prefix = Buffer.allocUnsafe(8);
  prefix.writeUInt32LE(4 + json.byteLength + bodyBytes, 0);
  prefix.writeUInt32LE(json.byteLength, 4);
  return [
    prefix,
    json,
    ...values.map((v) => (Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength))),
  ];
}

/** Writes a frame as one socket write (corking the parts), so frames of concurrent writers never interleave. */
export function writeFrame(socket: Socket, header: object, values: readonly Uint8Array[] = []): void {
  const parts = encodeFrame(header, values);
  socket.cork();
  for (const p of parts) socket.write(p);
  socket.uncork();
}

/** Splits a byte stream into frames. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** Feeds bytes; returns the frames completed by them. Throws IpcFrameError on a malformed stream. */
  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
    const out: Frame[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const length = head.readUInt32LE(0);
      if (length < 4 || length > MAX_IPC_FRAME_BYTES)
        throw new IpcFrameError(`frame of ${length} bytes is out of range`);
      if (this.buffered < 4 + length) break;
      const frame = this.take(4 + length).subarray(4);
      const headerBytes = frame.readUInt32LE(0);
      if (4 + headerBytes > frame.byteLength) throw new IpcFrameError('frame header runs past the frame');
      let header: unknown;
      try {
        header = JSON.parse(frame.toString('utf8', 4, 4 + headerBytes));
      } catch (e) {
        throw new IpcFrameError(`frame header is not JSON: ${(e as Error).message}`);
      }
      if (header === null || typeof header !== 'object' || Array.isArray(header))
        throw new IpcFrameError('frame header is not an object');
      out.push({ header: header as Record<string, unknown>, body: frame.subarray(4 + headerBytes) });
    }
    return out;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0].byteLength >= n) return this.chunks[0];
    return Buffer.concat(this.chunks).subarray(0, n);
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const frame = Buffer.from(all.subarray(0, n)); // own copy: values handed to handlers outlive the stream buffer
    const rest = all.subarray(n);
    this.chunks = rest.byteLength > 0 ? [rest] : [];
    this.buffered = rest.byteLength;
    return frame;
  }
}

/** Cuts `body` into consecutive values of the given lengths. */
export function splitValues(body: Buffer, lengths: readonly number[]): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  for (const n of lengths) {
    if (!Number.isSafeInteger(n) || n < 0 || at + n > body.byteLength)
      throw new IpcFrameError('message lengths do not match the frame body');
    out.push(body.subarray(at, at + n));
    at += n;
  }
  if (at !== body.byteLength) throw new IpcFrameError('frame body has bytes no message claims');
  return out;
}
