// `npm run bench -- soak [--seconds S] [--clients C] [--seed N]`: the soak of tests/soak/driver.ts (20 clients,
// an operator deploying/evicting/scaling at random, kill -9 of the agent, in compressed time) on the embedded
// fabric's real processes. Last line: { requests, completed, errored_with_reason, cancelled, lost, stuck,
// duplicates, …, durations }. lost, stuck and duplicates must be 0.
import { DEFAULT_SOAK, runSoak } from '../tests/soak/driver.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : fallback;
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const r = await runSoak({
    activeMs: arg(args, 'seconds', DEFAULT_SOAK.activeMs / 1000) * 1000,
    clients: arg(args, 'clients', DEFAULT_SOAK.clients),
    seed: arg(args, 'seed', DEFAULT_SOAK.seed),
    log: (s) => process.stderr.write(`soak: ${s}\n`),
  });
  process.stderr.write(
    `soak: ${r.requests} requests: ${r.completed} completed, ${r.errored_with_reason} errored with a reason, ${r.cancelled} cancelled; lost ${r.lost}, stuck ${r.stuck}, duplicates ${r.duplicates}\n`,
  );
  return { ...r };
}
