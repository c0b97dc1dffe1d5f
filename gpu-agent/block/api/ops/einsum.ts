// Tensor.einsum(spec, ...tensors), torch.einsum's explicit form: 'ij,jk->ik' (letters a–z and A–Z, `->` and the
// output required, no ellipsis). Differentiable: the gradient of operand k is the einsum of the output's gradient
// with the other operands onto k's subscripts (a letter repeated within one operand — a diagonal — is refused).
import { Tensor, TensorError } from '../tensor.js';
import { operandValue, registerDerivative } from '../tape.js';

declare module '../tensor.js' {
  namespace Tensor {
    function einsum(spec: string, ...tensors: Tensor[]): Tensor;
  }
}

/** The product over every letter's range, summed over the letters not in `out`. Sizes are known for all letters. */
function contract(subs: string[], out: string, tensors: Tensor[], sizes: Map<string, number>): Tensor {
  const letters = [...sizes.keys()];
  const pos = new Map(letters.map((l, i) => [l, i]));
  const shape = [...out].map((l) => sizes.get(l)!);
  const result = new Tensor('float32', shape);
  const o = result.data as Float32Array;
  const strides = subs.map((s, k) => {
    const st = new Array<number>(letters.length).fill(0);
    let acc = 1;
    for (let i = s.length - 1; i >= 0; i--) {
      st[pos.get(s[i]!)!]! += acc;
      acc *= tensors[k]!.shape[i]!;
    }
    return st;
  });
  const ost = new Array<number>(letters.length).fill(0);
  let acc = 1;
  for (let i = out.length - 1; i >= 0; i--) {
    ost[pos.get(out[i]!)!] = acc;
    acc *= shape[i]!;
  }
  const dims = letters.map((l) => sizes.get(l)!);
  const total = dims.reduce((a, b) => a * b, 1);
  if (total > 1e8) throw new TensorError(`einsum: ${total} products is too many (at most 1e8)`);
  const data = tensors.map((t) =>
    t.dtype === 'float32' ? (t.data as Float32Array) : (t.to('float32').data as Float32Array),
  );
  const counter = new Array<number>(letters.length).fill(0);
  const offs = new Array<number>(tensors.length).fill(0);
  let oo = 0;
  for (let n = 0; n < total; n++) {
    let p = 1;
    for (let k = 0; k < data.length; k++) p *= data[k]![offs[k]!]!;
    o[oo]! += p;
    for (let d = letters.length - 1; d >= 0; d--) {
      counter[d]!++;
      for (let k = 0; k < offs.length; k++) offs[k]! += strides[k]![d]!;
      oo += ost[d]!;
      if (counter[d]! < dims[d]!) break;
      for (let k = 0; k < offs.length; k++) offs[k]! -= strides[k]![d]! * dims[d]!;
      oo -= ost[d]! * dims[d]!;
      counter[d] = 0;
    }
  }
  return result;
}

function parse(spec: string, tensors: Tensor[]): { subs: string[]; out: string; sizes: Map<string, number> } {
  const m = /^([a-zA-Z,\s]+)->([a-zA-Z\s]*)$/.exec(spec);
  if (!m) throw new TensorError(`einsum: give the explicit form 'ij,jk->ik' (letters, commas, '->'), got '${spec}'`);
  const subs = m[1]!.replace(/\s/g, '').split(',');
  const out = m[2]!.replace(/\s/g, '');
  if (subs.length !== tensors.length || !tensors.every((t) => t instanceof Tensor))
    throw new TensorError(`einsum: '${spec}' names ${subs.length} operands, ${tensors.length} tensors were given`);
  const sizes = new Map<string, number>();
  subs.forEach((s, k) => {
    const t = tensors[k]!;
    if (s.length !== t.ndim) throw new TensorError(`einsum: operand ${k} has ${t.ndim} dims, '${s}' names ${s.length}`);
    [...s].forEach((l, i) => {
      const had = sizes.get(l);
      if (had !== undefined && had !== t.shape[i])
        throw new TensorError(`einsum: '${l}' is ${had} in one operand and ${t.shape[i]} in another`);
      sizes.set(l, t.shape[i]!);
    });
  });
  if (new Set(out).size !== out.length || [...out].some((l) => !sizes.has(l)))
    throw new TensorError(`einsum: the output '${out}' must name distinct letters of the operands`);
  return { subs, out, sizes };
}

function einsum(spec: string, ...tensors: Tensor[]): Tensor {
  const { subs, out, sizes } = parse(spec, tensors);
  return tensors[0]!.recorded(contract(subs, out, tensors, sizes), 'einsum', tensors, subs, out, sizes);
}

registerDerivative('einsum', (n, g) => {
  const [subs, out, sizes] = n.args as [string[], string, Map<string, number>];
  return subs.map((s, k) => {
    if (new Set(s).size !== s.length)
      throw new TensorError(`einsum: operand ${k} ('${s}') repeats a letter; its gradient is not supported`);
    const others = subs.flatMap((x, j) => (j === k ? [] : [x]));
    const values = n.inputs.flatMap((_, j) => (j === k ? [] : [operandValue(n, j)]));
    return contract([out, ...others], s, [g, ...values], sizes);
  });
});

Object.assign(Tensor, { einsum });
