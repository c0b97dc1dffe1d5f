// Seeded PRNG for the generated demo models: sfc32 (gpu-agent/runtime/generation/sfc32.ts, integer-only state
// updates) and exact float scaling, so the same seed gives bit-identical weights on every machine and Node version
// (no Math.log/sin/cos).
import { Sfc32 } from '../../gpu-agent/runtime/formats.js';

export { Sfc32 };

/**
 * Fills `out` with float32 values uniform on (mean - std·√3, mean + std·√3): standard deviation `std`.
 * Uniform rather than normal keeps generation free of transcendental functions (bit-for-bit determinism).
 */
export function fillUniform(rng: Sfc32, out: Float32Array, std: number, mean = 0): Float32Array {
  const half = std * Math.sqrt(3);
  for (let i = 0; i < out.length; i++) out[i] = mean + (2 * rng.next() - 1) * half;
  return out;
}
