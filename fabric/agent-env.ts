// The environment of an agent process the fabric starts (the embedded fabric's agent child): built from an
// allowlist, never inherited whole. A trusted block runs inside the agent and can read all of it, so it holds
// the agent's own settings and nothing worth more than the agent's role (docs/sandbox.md, "Trust model").
import { OPERATOR_SECRET_ENV, SECRET_NAME } from './operator-secrets.js';

/** Variables of the platform the agent (onnxruntime, Node, the sandbox's tools) reads. */
const SYSTEM = [
  'PATH',
  'HOME',
  'USER',
  'TMPDIR',
  'TZ',
  'LANG',
  'LANGUAGE',
  'NODE_OPTIONS',
  'NODE_ENV',
  'UV_THREADPOOL_SIZE',
  'OMP_NUM_THREADS',
  'CUDA_VISIBLE_DEVICES',
  'LD_LIBRARY_PATH',
  'ORT_LOG_LEVEL',
] as const;

/** Prefixes of the agent's own settings (NDIF_AGENT_*, NDIF_SANDBOX_*, …) and of the Kafka transport's. */
const PREFIXES = ['NDIF_', 'KAFKA_', 'LC_'] as const;

/** Whether `name` may pass from the fabric's environment into an agent's. */
export function agentMayInherit(name: string): boolean {
  if ((OPERATOR_SECRET_ENV as readonly string[]).includes(name) || SECRET_NAME.test(name)) return false;
  return (SYSTEM as readonly string[]).includes(name) || PREFIXES.some((p) => name.startsWith(p));
}

/** `env` reduced to what an agent may inherit, with `own` (the agent's settings) on top. */
export function agentEnv(env: NodeJS.ProcessEnv, own: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined && agentMayInherit(name)) out[name] = value;
  return { ...out, ...own };
}
