// Checked at load, not assumed: a cached generation must compute what the whole sequence computes. Two rows (one
// left-padded where the model can mask padding) run once whole, and once as a prompt followed by two cached
// single-token passes; every pass's last-position logits must match the whole run's at the same positions within
// 1e-3 of their scale (2e-2 for float16). A graph that derives something from the length it is fed (positions,
// a mask it builds itself) fails here, and the model is served without the cache, saying why.
import type { OrtTensor } from '../ort/session.js';
import type { InputPlan, PaddingSide } from '../graph/model-inputs.js';
import { feedsFor, padRows } from '../graph/model-inputs.js';
import { floatValues } from '../../../protocol/tensor-payload.js';
import { KvFeeder } from './kv-feeder.js';
import type { KvLayout } from './kv-layout.js';

/** Runs the whole graph on `feeds` and returns every output by name. */
export type WholeGraphRun = (feeds: Record<string, OrtTensor>) => Promise<Map<string, OrtTensor>>;

const values = (t: OrtTensor) =>
  floatValues(t.data as Float32Array | Uint16Array, t.type === 'float16' ? 'float16' : 'float32');

/** Why the cache does not reproduce the whole pass, or undefined when it does. */
export async function checkCache(
  run: WholeGraphRun,
  plan: InputPlan,
  layout: KvLayout,
  logits: string,
  padTokenId: number,
  vocab: number,
  padding: PaddingSide,
): Promise<string | undefined> {
  const v = Math.max(10, Math.min(vocab || 50, 50));
  const long = [7 % v, 2 % v, 9 % v, 4 % v, 6 % v];
  const short = padding === 'none' ? [1 % v, 3 % v, 5 % v, 8 % v, 2 % v] : [1 % v, 3 % v, 5 % v];
  const rows = [long, short];
  const cachedSteps = 2;
  try {
    const whole = (await run(feedsFor(plan, padRows(rows, padTokenId, 'left')))).get(logits)!;
    const [, wholeSeq, width] = whole.dims as [number, number, number];
    const want = values(whole);
    const feeder = new KvFeeder(
      plan,
      layout,
      true,
      rows.map((r) => r.slice(0, r.length - cachedSteps)),
      padTokenId,
    );
    let worst = 0;
    let scale = 1;
    for (let pass = 0; pass <= cachedSteps; pass++) {
      const table = await run(feeder.feeds());
      const got = table.get(logits)!;
      const seq = got.dims[1]!;
      const gv = values(got);
      const at = wholeSeq - cachedSteps - 1 + pass;
      for (let r = 0; r < rows.length; r++) {
        for (let k = 0; k < width; k++) {
          const a = Number(want[(r * wholeSeq + at) * width + k]);
          const b = Number(gv[(r * seq + seq - 1) * width + k]);
          scale = Math.max(scale, Math.abs(a));
          worst = Math.max(worst, Math.abs(a - b));
        }
      }
      feeder.absorb(table);
      if (pass < cachedSteps)
        feeder.append(
          rows.map((r) => r[r.length - cachedSteps + pass]!),
          rows.map(() => true),
        );
    }
    const tolerance = whole.type === 'float16' ? 2e-2 : 1e-3;
    if (!Number.isFinite(worst) || worst > tolerance * scale) {
      return `a cached step's logits differ from the whole sequence's by ${worst.toPrecision(3)} (scale ${scale.toPrecision(3)}): the graph computes something from the length it is fed (positions, or a mask it builds itself)`;
    }
    return undefined;
  } catch (e) {
    return `a cached step fails in onnxruntime: ${(e as Error).message.split('\n')[0]!.slice(0, 300)}`;
  }
}
