// Event builders shared by the domain tests.
import type { Because, DeploymentEvent, DeploymentSettings } from '../../domain/events/index.js';
import { resolveSettings } from '../../domain/deployment/settings.js';
import { GIB } from '../../domain/placement/size.js';

export const T0 = '2025-03-01T10:00:00.000Z';
export const at = (seconds: number): string => new Date(Date.parse(T0) + seconds * 1000).toISOString();
export const why: Because = { rule: 'test', text: 'test' };

export const settings = (over: Partial<Parameters<typeof resolveSettings>[0]> = {}): DeploymentSettings =>
  resolveSettings({ weightsBytes: 2 * GIB, ...over });

export function deployed(
  modelKey: string,
  s: DeploymentSettings = settings(),
  n = 1,
  pinned = false,
): DeploymentEvent[] {
  const out: DeploymentEvent[] = [
    {
      type: 'DeploymentRequested',
      data: { modelKey, settings: s, replicas: n, onDemand: false, pinned, because: null },
    },
  ];
  for (let i = 1; i <= n; i++) {
    out.push({
      type: 'ReplicaRequested',
      data: {
        modelKey,
        replicaId: `${modelKey}#${i}`,
        settings: s,
        reason: 'DEPLOY',
        copiedFrom: null,
        force: false,
        requestedAt: T0,
      },
    });
  }
  return out;
}

export function placed(
  modelKey: string,
  i: number,
  agentId: string,
  gpus: number[],
  bytesPerGpu: number,
  placedAt = T0,
): DeploymentEvent {
  return {
    type: 'ReplicaPlaced',
    data: {
      modelKey,
      replicaId: `${modelKey}#${i}`,
      agentId,
      bootId: 'b1',
      gpus,
      bytesPerGpu,
      sizeBytes: bytesPerGpu * gpus.length,
      placedAt,
      level: 'FREE',
      candidates: [],
      because: why,
    },
  };
}

export const hot = (modelKey: string, i: number, agentId: string, hotAt = T0): DeploymentEvent => ({
  type: 'ReplicaHot',
  data: { modelKey, replicaId: `${modelKey}#${i}`, agentId, hotAt, loadMs: 100 },
});
