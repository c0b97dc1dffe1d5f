// A trace's own parameters: reads of a module parameter (`@param:<path>`, answered at once) and swaps of one, which
// replace it for the rest of the trace (every step of a generation, every invoke's rows: a parameter is shared by the
// batch). A swap never touches what other requests see: the pass feeds the replacement under an alias that the
// initializer's readers read instead (segments planned with it are variants of their own in the segment cache), so
// the model's sessions and their weights stay as they are. A swap arriving once the pass has run a reader of the
// parameter in this trace is OutOfOrder: the rows computed with the old value would mix with the new one.
import type { BlockError, TensorPayload } from '../../../protocol/interleave.js';
import { checkPayload, firstNonFinite, sameShape } from '../../../protocol/tensor-payload.js';
import type { ParameterInfo } from '../graph/parameters.js';
import { parameterTensor } from '../load/parameter-data.js';
import type { OrtTensor } from '../ort/session.js';
import { type BlockErrorType, InterventionError, blockError } from '../errors.js';
import { parameterAlias } from './host-context.js';
import type { ForwardRun } from './host-context.js';
import type { Mediator } from './mediator.js';
import type { PassView } from './pass-view.js';

interface Swapped {
  info: ParameterInfo;
  /** What a later read of it returns (PyTorch's layout). */
  payload: TensorPayload;
  /** What the graph reads. */
  value: OrtTensor;
}

export class ParameterSwaps {
  /** By initializer: tied parameters are one tensor. */
  private readonly swapped = new Map<string, Swapped>();
  constructor(
    private readonly view: PassView,
    /** True when the request records its passes for a backward. */
    private readonly recording: () => boolean,
  ) {}

  private info(path: string): ParameterInfo | BlockError {
    const p = this.view.ctx.parameters.get(path);
    if (p) return p;
    const names = [...this.view.ctx.parameters.keys()];
    const dot = path.lastIndexOf('.');
    const mine = names.filter((n) => n.startsWith(`${path.slice(0, dot)}.`) && !n.slice(dot + 1).includes('.'));
    return blockError(
      'UnknownModule',
      `${path} is not a parameter of ${this.view.ctx.graph.modules.has(path.slice(0, dot)) ? path.slice(0, dot) : 'the model'}${mine.length > 0 ? `; it has ${mine.map((n) => n.slice(dot + 1)).join(', ')}` : ''}`,
    );
  }

  /** The parameter's value for this trace: its swap when one was made, else the stored weights. */
  read(path: string): TensorPayload[] | BlockError {
    const p = this.info(path);
    if ('type' in p) return p;
    const s = this.swapped.get(p.tensor);
    return [s ? { ...s.payload, data: s.payload.data.slice() } : this.view.ctx.parameterValue(p)];
  }

  /** Replaces the parameter for the rest of the trace; throws what was wrong with the swap. */
  swap(inv: Mediator, path: string, values: TensorPayload[]): void {
    const fail = (type: BlockErrorType, message: string) => new InterventionError(blockError(type, message), inv.index);
    const p = this.info(path);
    if ('type' in p) throw new InterventionError(p, inv.index);
    if (this.recording())
      throw fail(
        'NotDifferentiable',
        `swap of ${path}: a request that runs a backward cannot swap a parameter (gradients flow to activations only)`,
      );
    if (values.length !== 1) throw fail('ShapeMismatch', `${path} is one tensor; the swap gave ${values.length}`);
    const v = values[0]!;
    try {
      checkPayload(v);
    } catch (e) {
      throw new InterventionError(
        blockError('ProtocolError', `swap of ${path}: ${(e as Error).message}`, 'protocol'),
        inv.index,
      );
    }
    const dtype = p.elemType === 10 ? 'float16' : 'float32';
    if (v.dtype !== dtype) throw fail('DtypeMismatch', `swap of ${path}: expected ${dtype}, got ${v.dtype}`);
    if (!sameShape(v.shape, p.shape))
      throw fail(
        'ShapeMismatch',
        `swap of ${path}: expected shape [${p.shape.join(', ')}], got [${v.shape.join(', ')}]`,
      );
    const bad = firstNonFinite(v);
    if (bad >= 0) throw fail('NonFinite', `swap of ${path}: element ${bad} is not finite (NaN or ±Infinity)`);
    const pass = this.view.pass;
    const readers = this.view.ctx.graph.consumers.get(p.tensor) ?? [];
    if (pass && (this.view.step > 0 || pass.pos > readers[0]!)) {
      throw fail(
        'OutOfOrder',
        `swap of ${path} arrived after the forward pass had read it (it is at ${this.view.here()}): swap a parameter before awaiting any module that uses it, e.g. first in the block`,
      );
    }
    // The values are the request's own copy (cloned on the block side, or decoded from a frame): kept as they are.
    const swapped = { info: p, payload: v, value: parameterTensor(p, v) };
    this.swapped.set(p.tensor, swapped);
    if (pass) this.feed(pass, swapped);
  }

  /** Feeds every swap made so far to a new pass (each step of a generation has its own). */
  applyTo(pass: ForwardRun): void {
    for (const s of this.swapped.values()) this.feed(pass, s);
  }

  private feed(pass: ForwardRun, s: Swapped): void {
    const readers = this.view.ctx.graph.consumers.get(s.info.tensor) ?? [];
    const alias = parameterAlias(s.info.tensor);
    if (!pass.aliases.some((a) => a.alias === alias))
      pass.aliases.push({ tensor: s.info.tensor, alias, from: readers[0]!, to: readers[readers.length - 1]! + 1 });
    pass.table.set(alias, s.value);
  }

  /** Parameter paths swapped in this trace (for the request's record). */
  get paths(): string[] {
    return [...this.swapped.values()].map((s) => s.info.path);
  }
}
