// Every derivative rule, by op (`<domain>:<op>` outside the default ONNX domain). An op not listed here has no
// gradient: a backward that would pass through it is refused (NotDifferentiable) before anything runs.
import type { NodeProto } from '../../onnx/types.js';
import type { Rule } from '../rule-types.js';
import { ELEMENTWISE_RULES } from './elementwise.js';
import { LINEAR_RULES } from './linear.js';
import { NORM_RULES } from './norms.js';
import { REDUCTION_RULES } from './reductions.js';
import { SHAPE_RULES } from './shape.js';

const RULES: ReadonlyMap<string, Rule> = new Map(
  Object.entries({ ...ELEMENTWISE_RULES, ...LINEAR_RULES, ...NORM_RULES, ...REDUCTION_RULES, ...SHAPE_RULES }),
);

export function opKey(node: NodeProto): string {
  const domain = node.domain ?? '';
  return domain === '' || domain === 'ai.onnx' ? node.op_type : `${domain}:${node.op_type}`;
}

export function ruleFor(node: NodeProto): Rule | undefined {
  return RULES.get(opKey(node));
}

/** The ops that have a derivative rule (for docs and errors). */
export function differentiableOps(): string[] {
  return [...RULES.keys()].sort();
}
