// Seeded PRNG for the generated demo models. Integer-only state updates (sfc32) and exact float scaling, so
// the same seed gives bit-identical weights on every machine and Node version (no Math.log/sin/cos).

export class Sfc32 {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.nextU32();
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

  /** Uniform in [0, 1), exactly representable. */
  next(): number {
    return this.nextU32() / 4294967296;
  }
}

/**
 * Fills `out` with float32 values uniform on (mean - std·√3, mean + std·√3): standard deviation `std`.
 * Uniform rather than normal keeps generation free of transcendental functions (bit-for-bit determinism).
 */
export function fillUniform(rng: Sfc32, out: Float32Array, std: number, mean = 0): Float32Array {
  const half = std * Math.sqrt(3);
  for (let i = 0; i < out.length; i++) out[i] = mean + (2 * rng.next() - 1) * half;
  return out;
}
