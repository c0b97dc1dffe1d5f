// One planning round: every rule reads the same view, in an order where the safe thing happens first
// (requeue before an unload completes, make room before placing, place before dispatch). Pure: the same view,
// time and heartbeats give the same commands.
import { PlanContext, type PlanInput, type PlannedCommand } from './plan-context.js';
import { agentHealthRule, agentLossRule, drainRule } from './rules/agents.js';
import { autoscaleRule } from './rules/autoscale.js';
import { dispatchRule } from './rules/dispatch.js';
import { onDemandRule } from './rules/on-demand.js';
import { placementRule } from './rules/placement.js';
import { preemptionRule } from './rules/preemption.js';
import { retentionRule } from './rules/retention.js';
import { timeoutRule } from './rules/timeouts.js';

export const RULES = [
  agentHealthRule,
  agentLossRule,
  preemptionRule,
  drainRule,
  timeoutRule,
  onDemandRule,
  placementRule,
  dispatchRule,
  autoscaleRule,
  retentionRule,
] as const;

export function planRound(input: PlanInput): PlannedCommand[] {
  const ctx = new PlanContext(input);
  for (const rule of RULES) rule(ctx);
  return ctx.planned;
}
