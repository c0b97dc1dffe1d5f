// One request's generation: per batch row its sampler (seeded stream), its stop rules and what it generated; the
// feeder builds each pass's inputs and carries the KV cache. After each pass `choose` picks every live row's next
// token from the logits of its last position and decides which rows are finished.
import { createHash, randomInt } from 'node:crypto';
import type { GenerationOptions } from '../../../protocol/generation.js';
import type { OrtTensor } from '../ort/session.js';
import type { InputPlan } from '../graph/model-inputs.js';
import { floatValues } from '../../../protocol/tensor-payload.js';
import { KvFeeder } from './kv-feeder.js';
import type { KvLayout } from './kv-layout.js';
import { RowSampler, samplerSettings } from './sampler.js';
import { RowStopper } from './stopping.js';
import type { Finish } from './stopping.js';

export interface RowSpec {
  invoke: number;
  prompt: number[];
  /** The invoke's options (its own over the request's). */
  options: GenerationOptions;
  /** The seed its sampler uses (resolved: given, derived from the request's, or drawn). */
  seed: number;
}

export interface GenerationSetup {
  plan: InputPlan;
  layout: KvLayout;
  cached: boolean;
  padTokenId: number;
  eos: readonly number[];
  maxNewTokens: number;
  decode: ((ids: number[]) => string) | undefined;
}

export interface ChosenToken {
  row: number;
  invoke: number;
  token: number;
  finish?: Finish;
}

interface Row {
  spec: RowSpec;
  sampler: RowSampler;
  stopper: RowStopper;
  generated: number[];
  finish?: Finish;
}

/** A request's seed when it gives none: 48 bits of the sha256 of its id, so every attempt of it (a retry on another agent) samples alike. */
export function seedOfRequestId(requestId: string): number {
  return Number.parseInt(createHash('sha256').update(requestId).digest('hex').slice(0, 12), 16);
}

/** The seed of invoke `i`: its own, else one derived from the request's (invoke 0 gets the request's as is), else drawn. */
export function resolveSeed(own: number | undefined, request: number | undefined, invoke: number): number {
  if (own !== undefined) return own;
  if (request === undefined) return randomInt(2 ** 48 - 1);
  if (invoke === 0) return request;
  // splitmix-style mixing on 32-bit halves: integer-only, the same everywhere.
  let h = Math.imul((request % 4294967296) ^ Math.imul(invoke, 0x9e3779b9), 0x85ebca6b) >>> 0;
  let l = Math.imul(Math.floor(request / 4294967296) ^ (invoke * 0x27d4eb2f), 0xc2b2ae35) >>> 0;
  h = (h ^ (l >>> 13)) >>> 0;
  l = Math.imul(l ^ (h >>> 16), 0x165667b1) >>> 0;
  return (h % 2097152) * 4294967296 + l;
}

export class Generation {
  readonly feeder: KvFeeder;
  private readonly rows: Row[];

  constructor(
    private readonly setup: GenerationSetup,
    specs: RowSpec[],
  ) {
    this.feeder = new KvFeeder(
      setup.plan,
      setup.layout,
      setup.cached,
      specs.map((s) => s.prompt),
      setup.padTokenId,
    );
    this.rows = specs.map((spec) => {
      const o = spec.options;
      const eos = o.ignoreEos ? [] : setup.eos;
      return {
        spec,
        sampler: new RowSampler(samplerSettings(o), spec.seed, spec.prompt),
        stopper: new RowStopper(
          {
            eos,
            stopTokenIds: o.stopTokenIds ?? [],
            stop: o.stop ?? [],
            maxNewTokens: o.maxNewTokens ?? setup.maxNewTokens,
          },
          setup.decode,
        ),
        generated: [],
      };
    });
  }

  get allFinished(): boolean {
    return this.rows.every((r) => r.finish !== undefined);
  }

  /** The next token of every live row from the pass's logits (last fed position), then appends them. */
  choose(step: number, logits: OrtTensor, table: Map<string, OrtTensor>): ChosenToken[] {
    this.feeder.absorb(table);
    const [batch, seq, vocab] = logits.dims as [number, number, number];
    const data = floatValues(
      logits.data as Float32Array | Uint16Array,
      logits.type === 'float16' ? 'float16' : 'float32',
    );
    const chosen: ChosenToken[] = [];
    const tokens: number[] = [];
    const real: boolean[] = [];
    this.rows.forEach((row, r) => {
      if (row.finish !== undefined || r >= batch) {
        tokens.push(this.setup.padTokenId);
        real.push(false);
        return;
      }
      const token = row.sampler.choose(data, (r * seq + seq - 1) * vocab, vocab);
      row.generated.push(token);
      const finish = row.stopper.check(row.generated, step);
      if (finish) row.finish = finish;
      chosen.push({ row: r, invoke: row.spec.invoke, token, ...(finish ? { finish } : {}) });
      tokens.push(token);
      real.push(true);
    });
    this.feeder.append(tokens, real);
    return chosen;
  }
}
