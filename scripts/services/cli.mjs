// Starts the test services by hand: `node scripts/services/cli.mjs [name,...] [-- command args...]`.
// With a command: runs it with the services' environment and stops them when it exits (its exit code
// is ours). Without one: prints {env, info} as one JSON line and keeps them up until
// Ctrl-C, SIGTERM or the end of stdin. Names: postgres, kafka, chromium, compose (default: postgres,kafka).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServices } from './index.mjs';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const argv = process.argv.slice(2);
const dash = argv.indexOf('--');
const names = (dash === -1 ? argv : argv.slice(0, dash)).join(',');
const command = dash === -1 ? [] : argv.slice(dash + 1);
process.env.NDIF_SERVICES = names || process.env.NDIF_SERVICES || 'postgres,kafka';

let services;
try {
  services = await startServices({ root, fullRun: false });
} catch (e) {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
}

let child;
let done;
const finish = async (code) => {
  done ??= services.stop().then(() => process.exit(code));
  return done;
};
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    if (child) child.kill(sig);
    else finish(sig === 'SIGINT' ? 130 : 143);
  });
}

if (command.length > 0) {
  child = spawn(command[0], command.slice(1), { stdio: 'inherit', env: { ...process.env, ...services.env } });
  child.on('exit', (c, sig) => finish(c ?? (sig ? 1 : 0)));
} else {
  process.stdout.write(`${JSON.stringify({ env: services.env, info: services.info })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => finish(0));
}
