// Shared by the sandbox tests: the bundled tiny model loaded once per file, its INIT assets, a sandbox
// configured for tests, and process/condition polling.
import { processRunning } from '../../sandbox/process-alive.js';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel, RunResult } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { DEFAULT_LIMITS } from '../../sandbox/config.js';
import type { SandboxConfig } from '../../sandbox/config.js';
import { Sandbox, modelAssets } from '../../sandbox/sandbox.js';
import type { ModelAssets } from '../../sandbox/launcher.js';

let tiny: Promise<HostedModel> | undefined;

export function tinyModel(): Promise<HostedModel> {
  tiny ??= loadModel(ensureModel('gpt2-tiny'), { key: 'gpt2-tiny' });
  return tiny;
}

export async function tinyAssets(): Promise<ModelAssets> {
  return modelAssets(await tinyModel());
}

/** The sandbox tests' prompt: "The quick brown" in GPT-2 ids. */
export const TOKENS = [464, 2068, 7586];

/** The untrusted path: one invoke per block on TOKENS, in a runner of `sb`'s gpt2-tiny pool. */
export function runUntrusted(
  hm: HostedModel,
  sb: Sandbox,
  blocks: string[],
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<RunResult> {
  return hm.run(
    { invokes: blocks.map((block) => ({ tokens: TOKENS, block })), timeoutMs, ...(signal ? { signal } : {}) },
    sb.opener('gpt2-tiny'),
  );
}

/** The trusted path: blocks in this process. */
export function inProcess(hm: HostedModel) {
  return () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
}

export function testConfig(
  over: Omit<Partial<SandboxConfig>, 'limits'> & { limits?: Partial<SandboxConfig['limits']> } = {},
): SandboxConfig {
  return {
    poolSize: over.poolSize ?? 1,
    maxPoolSize: over.maxPoolSize ?? 2,
    networkNamespace: over.networkNamespace ?? true,
    uid: 65534,
    gid: 65534,
    limits: { ...DEFAULT_LIMITS, ...over.limits },
  };
}

/** A sandbox with the tiny model registered and its pool warm. */
export async function tinySandbox(
  over: Parameters<typeof testConfig>[0] = {},
  agentEnv?: NodeJS.ProcessEnv,
): Promise<{ sb: Sandbox; hm: HostedModel }> {
  const hm = await tinyModel();
  const sb = new Sandbox({ config: testConfig(over), ...(agentEnv ? { agentEnv } : {}) });
  const pool = sb.register(modelAssets(hm));
  await pool.whenReady(Math.min(1, pool.target));
  return { sb, hm };
}

/** True once `pid` no longer runs (gone, or a zombie nobody reaped yet). */
export async function processGone(pid: number, timeoutMs = 5000): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (!processRunning(pid)) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function waitFor(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
