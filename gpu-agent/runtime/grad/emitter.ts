// Emits the nodes of a gradient graph: fresh names, literal constants (one Constant node per value and type), and
// the few composite steps every derivative rule shares — reducing a broadcast gradient back to its operand's shape
// (statically from the probed dims when they say enough, else with shape arithmetic at run time), and
// opset-correct reductions, squeezes and transposes. Gradient graphs need opset 13 or later (axes as inputs).
import type { NodeProto } from '../onnx/types.js';
import { TensorDataType } from '../onnx/types.js';
import type { DimFit } from '../load/dims.js';
import { attribute, floatLiteral, int64Literal } from './onnx-nodes.js';
import type { AttrValue } from './onnx-nodes.js';

export type Dims = Array<DimFit | null>;

const isOne = (d: DimFit | null): boolean => d !== null && d.k === 1 && d.b === 0 && d.t === 0 && d.bt === 0;
const sameDim = (a: DimFit | null, b: DimFit | null): boolean =>
  a !== null && b !== null && a.k === b.k && a.b === b.b && a.t === b.t && a.bt === b.bt;

export class GradEmitter {
  readonly nodes: NodeProto[] = [];
  private count = 0;
  private readonly literals = new Map<string, string>();

  constructor(
    readonly opset: number,
    private readonly prefix: string,
  ) {}

  op(type: string, inputs: string[], attrs: Record<string, AttrValue> = {}, outputs = 1): string[] {
    const id = `${this.prefix}${this.count++}_${type}`;
    const output = Array.from({ length: outputs }, (_, i) => (outputs === 1 ? id : `${id}:${i}`));
    const node: NodeProto = { name: id, op_type: type, input: inputs, output };
    const attribute_ = Object.entries(attrs).map(([k, v]) => attribute(k, v));
    if (attribute_.length > 0) node.attribute = attribute_;
    this.nodes.push(node);
    return output;
  }

  one(type: string, inputs: string[], attrs: Record<string, AttrValue> = {}): string {
    return this.op(type, inputs, attrs)[0]!;
  }

  private literal(key: string, make: () => NodeProto['attribute']): string {
    const hit = this.literals.get(key);
    if (hit) return hit;
    const id = `${this.prefix}${this.count++}_Constant`;
    this.nodes.push({ name: id, op_type: 'Constant', input: [], output: [id], attribute: make() });
    this.literals.set(key, id);
    return id;
  }

  /** A scalar of a float type (float32, float16, float64). */
  float(v: number, elemType: number): string {
    return this.literal(`f${elemType}:${v}`, () => [attribute('value', { tensor: floatLiteral([v], elemType, []) })]);
  }

  /** A float tensor of `dims` filled with `v`. */
  floatFilled(v: number, elemType: number, dims: number[]): string {
    const n = dims.reduce((a, b) => a * b, 1);
    return this.literal(`F${elemType}:${v}:${dims.join('x')}`, () => [
      attribute('value', { tensor: floatLiteral(new Array<number>(n).fill(v), elemType, dims) }),
    ]);
  }

  /** An int64 vector (or scalar when `scalar`). */
  ints(values: number[], scalar = false): string {
    return this.literal(`i${scalar ? 's' : 'v'}:${values.join(',')}`, () => [
      attribute('value', { tensor: int64Literal(values, scalar ? [] : [values.length]) }),
    ]);
  }

  /** A zero scalar of ONNX element type `elemType`. */
  zero(elemType: number): string {
    return this.float(0, elemType);
  }

  reduceSum(x: string, axes: number[], keepdims: boolean): string {
    return this.one('ReduceSum', [x, this.ints(axes)], { keepdims: keepdims ? 1 : 0 });
  }

  unsqueeze(x: string, axes: number[] | string): string {
    return this.one('Unsqueeze', [x, typeof axes === 'string' ? axes : this.ints(axes)]);
  }

  squeeze(x: string, axes: number[]): string {
    return this.one('Squeeze', [x, this.ints(axes)]);
  }

  /** Swaps the last two dims of a tensor of rank `rank`. */
  transposeLast2(x: string, rank: number): string {
    const perm = Array.from({ length: rank }, (_, i) => i);
    [perm[rank - 2], perm[rank - 1]] = [perm[rank - 1]!, perm[rank - 2]!];
    return this.one('Transpose', [x], { perm });
  }

  cast(x: string, to: number): string {
    return this.one('Cast', [x], { to });
  }

  /**
   * Sums gradient `grad` (dims `gradDims`, the shape of the broadcast result) down to the shape of an operand that
   * was broadcast (dims `targetDims`; `targetShape()` gives its shape tensor when run-time arithmetic is needed).
   */
  sumTo(grad: string, gradDims: Dims | undefined, targetDims: Dims | undefined, targetShape: () => string): string {
    const plan = gradDims && targetDims ? staticReduction(gradDims, targetDims) : undefined;
    if (plan) {
      if (plan.axes.length === 0) return grad;
      const summed = this.reduceSum(grad, plan.axes, true);
      return plan.lead > 0
        ? this.squeeze(
            summed,
            Array.from({ length: plan.lead }, (_, i) => i),
          )
        : summed;
    }
    if (!gradDims || !targetDims) throw new Error('internal: the rank of a broadcast operand is unknown');
    // At run time: reduce the axes where the (left-padded) operand has 1 and the gradient does not.
    const lead = gradDims.length - targetDims.length;
    const target = targetShape();
    const padded =
      lead > 0 ? this.one('Concat', [this.ints(new Array<number>(lead).fill(1)), target], { axis: 0 }) : target;
    const one = this.ints([1]);
    const mask = this.one('And', [
      this.one('Equal', [padded, one]),
      this.one('Not', [this.one('Equal', [this.one('Shape', [grad]), one])]),
    ]);
    const axes = this.squeeze(this.one('NonZero', [mask]), [0]);
    const summed = this.one('ReduceSum', [grad, axes], { keepdims: 1, noop_with_empty_axes: 1 });
    return this.one('Reshape', [summed, target]);
  }

  /** 1 / (number of elements of `of` per element of `per`), as a scalar of `elemType`, at run time. */
  countRatio(ofShape: string, perShape: string, elemType: number): string {
    const prod = (s: string) => this.one('ReduceProd', [this.cast(s, TensorDataType.DOUBLE)], { keepdims: 0 });
    return this.cast(this.one('Div', [prod(perShape), prod(ofShape)]), elemType);
  }
}

/** Reduction axes known from the dims alone, or undefined when some dim cannot be decided statically. */
function staticReduction(gradDims: Dims, targetDims: Dims): { axes: number[]; lead: number } | undefined {
  const lead = gradDims.length - targetDims.length;
  if (lead < 0) return undefined;
  const axes = Array.from({ length: lead }, (_, i) => i);
  for (let d = 0; d < targetDims.length; d++) {
    const a = targetDims[d]!;
    const y = gradDims[d + lead]!;
    if (isOne(a)) {
      if (!isOne(y)) axes.push(d + lead);
    } else if (!sameDim(a, y)) return undefined;
  }
  return { axes, lead };
}
