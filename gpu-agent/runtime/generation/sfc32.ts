// sfc32: a small seeded PRNG with integer-only state updates, so a seed gives the same numbers on every machine
// and Node version. The bundled models' weights (catalog/bundled/prng.ts) and the sampler's draws use it.

export class Sfc32 {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number, hi = 0) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88 ^ (hi >>> 0);
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.nextU32();
  }

  /** A generator for a seed of up to 53 bits (the high bits go into a second state word). */
  static seeded(seed: number): Sfc32 {
    return new Sfc32(seed % 4294967296, Math.floor(seed / 4294967296));
  }

  nextU32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1), exactly representable (32 bits). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  next53(): number {
    const hi = this.nextU32() >>> 5;
    const lo = this.nextU32() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }
}
