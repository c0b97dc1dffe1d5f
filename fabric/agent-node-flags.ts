// The V8 flags a GPU agent's node process starts with (the Dockerfile's gpu-agent line, the embedded fabric's agent
// child, and the benches, which measure the runtime as an agent runs it).
//
// --initial-old-space-size: with a model loaded the agent's live JS heap is small (~34 MB on GPT-2-small shape) and,
// without a configured old-generation size, V8 shrinks its old-generation limit to just above it and keeps starting
// incremental marking: a mark-compact followed about every 750 KB a request allocated, so a request cut at every layer
// (12 attention reads) paid ~0.7 mark-compacts where a plain forward paid 0.3. With the size configured V8 keeps
// the limit at least there (docs/runtime.md, "What a cut costs beyond its session.run").
export const AGENT_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=256'];

/**
 * The node arguments that run `script` with `args` under the agent's flags, or null when this process has them all
 * already (`execArgv` is the running process's).
 */
export function withAgentFlags(execArgv: readonly string[], script: string, args: readonly string[]): string[] | null {
  const missing = AGENT_NODE_FLAGS.filter((f) => !execArgv.includes(f));
  return missing.length === 0 ? null : [...execArgv, ...missing, script, ...args];
}
