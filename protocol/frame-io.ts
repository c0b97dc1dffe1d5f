// The byte level of the sandbox's frames (protocol/frames.ts): a writer and a reader of little-endian integers,
// floats, UTF-8 strings and 8-byte aligned raw bytes, each refusing what it cannot write or read exactly.
import { FabricError } from './errors.js';

/** Bytes before the body: u32 length + u8 tag. */
export const FRAME_HEADER_BYTES = 5;
export const U32_MAX = 0xffff_ffff;

export type ProtocolErrorCode =
  | 'FRAME_UNKNOWN_TAG'
  | 'FRAME_TOO_LARGE'
  | 'FRAME_TRUNCATED'
  | 'FRAME_MALFORMED'
  | 'FRAME_UNENCODABLE';

/** A frame that cannot be read (or a message that cannot be written). The stream cannot be trusted after it. */
export class ProtocolError extends FabricError {
  constructor(code: ProtocolErrorCode, message: string, details?: Record<string, unknown>) {
    super(code, 500, message, details === undefined ? {} : { details });
    this.name = 'ProtocolError';
  }
}

export function unencodable(message: string): never {
  throw new ProtocolError('FRAME_UNENCODABLE', message);
}

export function malformed(message: string): ProtocolError {
  return new ProtocolError('FRAME_MALFORMED', message);
}

export class FrameWriter {
  private readonly parts: Uint8Array[] = [];
  private scratch = Buffer.allocUnsafe(512);
  private pos = 0;
  /** Body bytes written so far (scratch included). */
  private total = 0;

  private room(n: number): void {
    if (this.pos + n <= this.scratch.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.scratch.length * 2, this.pos + n));
    this.scratch.copy(next, 0, 0, this.pos);
    this.scratch = next;
  }

  u8(v: number): void {
    this.room(1);
    this.scratch[this.pos++] = v;
    this.total += 1;
  }

  u32(v: number, what: string): void {
    if (!Number.isInteger(v) || v < 0 || v > U32_MAX)
      unencodable(`${what} must be an integer in [0, 2^32), got ${String(v)}`);
    this.room(4);
    this.scratch.writeUInt32LE(v, this.pos);
    this.pos += 4;
    this.total += 4;
  }

  f64(v: number, what: string): void {
    if (!Number.isFinite(v)) unencodable(`${what} must be a finite number, got ${String(v)}`);
    this.room(8);
    this.scratch.writeDoubleLE(v, this.pos);
    this.pos += 8;
    this.total += 8;
  }

  /** UTF-8 with a u32 byte length. Lone surrogates become U+FFFD (as every UTF-8 encoder does). */
  str(s: string, what: string): void {
    if (typeof s !== 'string') unencodable(`${what} must be a string, got ${typeof s}`);
    const n = Buffer.byteLength(s, 'utf8');
    this.u32(n, `${what} length`);
    this.room(n);
    this.scratch.write(s, this.pos, n, 'utf8');
    this.pos += n;
    this.total += n;
  }

  optStr(s: string | null | undefined, what: string): void {
    if (s === undefined || s === null) {
      this.u8(0);
      return;
    }
    this.u8(1);
    this.str(s, what);
  }

  /** Zero bytes up to the next multiple of 8 from the start of the frame. */
  align8(): void {
    const pad = (8 - ((FRAME_HEADER_BYTES + this.total) % 8)) % 8;
    this.room(pad);
    this.scratch.fill(0, this.pos, this.pos + pad);
    this.pos += pad;
    this.total += pad;
  }

  raw(bytes: Uint8Array): void {
    if (bytes.length <= 256) {
      this.room(bytes.length);
      this.scratch.set(bytes, this.pos);
      this.pos += bytes.length;
    } else {
      this.flushScratch();
      this.parts.push(bytes);
    }
    this.total += bytes.length;
  }

  private flushScratch(): void {
    if (this.pos === 0) return;
    this.parts.push(this.scratch.subarray(0, this.pos));
    this.scratch = Buffer.allocUnsafe(512);
    this.pos = 0;
  }

  finish(tag: number, maxFrameBytes: number): Buffer {
    this.flushScratch();
    const length = 1 + this.total;
    if (length > maxFrameBytes) {
      throw new ProtocolError(
        'FRAME_TOO_LARGE',
        `message needs a ${length}-byte frame, over the ${maxFrameBytes}-byte limit`,
        { length, maxFrameBytes },
      );
    }
    const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    header.writeUInt32LE(length, 0);
    header[4] = tag;
    return Buffer.concat([header, ...this.parts], FRAME_HEADER_BYTES + this.total);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export class FrameReader {
  private pos = 0;
  private readonly view: DataView;

  /** `frame` is the whole frame, header included (offsets are relative to its start for alignment). */
  constructor(
    private readonly frame: Uint8Array,
    private readonly kind: string,
  ) {
    this.view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
    this.pos = FRAME_HEADER_BYTES;
  }

  private need(n: number, what: string): void {
    if (this.frame.length - this.pos < n) {
      throw malformed(`${this.kind} frame ends inside ${what}: needs ${n} bytes, ${this.frame.length - this.pos} left`);
    }
  }

  get remaining(): number {
    return this.frame.length - this.pos;
  }

  u8(what: string): number {
    this.need(1, what);
    return this.frame[this.pos++]!;
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }

  f64(what: string): number {
    this.need(8, what);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    if (!Number.isFinite(v)) throw malformed(`${this.kind} frame: ${what} is not a finite number`);
    return v;
  }

  flag(what: string): boolean {
    const f = this.u8(`${what} flag`);
    if (f > 1) throw malformed(`${this.kind} frame: ${what} flag is ${f}, expected 0 or 1`);
    return f === 1;
  }

  str(what: string): string {
    const n = this.u32(`${what} length`);
    this.need(n, what);
    const bytes = this.frame.subarray(this.pos, this.pos + n);
    this.pos += n;
    try {
      return utf8.decode(bytes);
    } catch {
      throw malformed(`${this.kind} frame: ${what} is not valid UTF-8`);
    }
  }

  optStr(what: string): string | undefined {
    return this.flag(what) ? this.str(what) : undefined;
  }

  align8(what: string): void {
    const pad = (8 - (this.pos % 8)) % 8;
    this.need(pad, `${what} padding`);
    for (let i = 0; i < pad; i++) {
      if (this.frame[this.pos + i] !== 0) throw malformed(`${this.kind} frame: non-zero padding before ${what}`);
    }
    this.pos += pad;
  }

  /** A view when the bytes are 8-byte aligned in memory, else an aligned copy. */
  bytes(n: number, what: string): Uint8Array {
    this.need(n, what);
    const view = this.frame.subarray(this.pos, this.pos + n);
    this.pos += n;
    return view.byteOffset % 8 === 0 ? new Uint8Array(view.buffer, view.byteOffset, n) : new Uint8Array(view);
  }

  /** A count of items each at least `minBytes` long, checked against what is left so no huge array is allocated. */
  count(what: string, minBytes: number): number {
    const n = this.u32(`${what} count`);
    if (n * minBytes > this.remaining)
      throw malformed(`${this.kind} frame: ${n} ${what} cannot fit in the ${this.remaining} bytes left`);
    return n;
  }

  done(): void {
    if (this.pos !== this.frame.length)
      throw malformed(`${this.kind} frame has ${this.frame.length - this.pos} trailing bytes`);
  }
}
