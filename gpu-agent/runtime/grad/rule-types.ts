// What a derivative rule sees: one forward node, the gradients reaching its outputs, and ways to ask for forward
// values, shapes and literal inputs. A rule emits gradient nodes and hands each differentiable input its
// contribution; the gradient graph sums contributions and reduces nothing else.
import type { NodeProto } from '../onnx/types.js';
import type { Dims, GradEmitter } from './emitter.js';

export interface RuleCtx {
  e: GradEmitter;
  node: NodeProto;
  /** Input names as the forward node reads them ('' for an absent optional input). */
  ins: string[];
  outs: string[];
  /** Gradient of each output; undefined where none reaches it. */
  g: Array<string | undefined>;
  /** Input i is an activation the gradient flows into. */
  wants(i: number): boolean;
  give(i: number, grad: string): void;
  /** A forward tensor the rule reads (recomputed from the segment's checkpoint when not kept). */
  value(t: string): string;
  /** An int64 tensor with the shape of forward tensor t. */
  shape(t: string): string;
  dims(t: string): Dims | undefined;
  elem(t: string): number;
  /** Integer values of an input given as a literal (Constant node or initializer); undefined otherwise. */
  literal(t: string): number[] | undefined;
}

export type Rule = (c: RuleCtx) => void;

/** A rule's refusal to differentiate this particular use of its op (a rank or opset it does not handle). */
export class RuleUnsupported extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'RuleUnsupported';
  }
}
