// The runner's environment is built from an allowlist, never inherited: API keys, database URLs, tokens
// and NODE_OPTIONS (which could preload code) in the agent's environment never reach a block.

/**
 * Variables copied from the agent when set. Locale and timezone (they change formatting, nothing else) and the log
 * limits, which the runner applies to its block's output as the agent does (protocol/log-limits.ts).
 */
export const RUNNER_ENV_ALLOWLIST = [
  'TZ',
  'LANG',
  'LC_ALL',
  'LC_CTYPE',
  'NDIF_LOG_MAX_LINES',
  'NDIF_LOG_MAX_BYTES',
] as const;

export function runnerEnv(agentEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of RUNNER_ENV_ALLOWLIST) {
    const v = agentEnv[name];
    if (v !== undefined) env[name] = v;
  }
  return env;
}
