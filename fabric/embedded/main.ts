// The embedded fabric, what `npm start` runs: this process supervises the control plane
// (control-plane-process.ts: event store, projection, scheduler, relay, the APIs on one port, and the GPU agent child
// it supervises in turn) and starts it again if it dies (supervisor.ts). SIGINT/SIGTERM stop everything cleanly;
// the exit code is the control plane's.
import { logFormatFromEnv, processLogger } from '../log.js';
import { operatorSecretsOf, scrubOwnEnvironment } from '../operator-secrets.js';
import { embeddedConfigFromEnv } from './config.js';
import { ControlPlaneSupervisor } from './supervisor.js';

const log = processLogger('fabric-supervisor');

try {
  const config = embeddedConfigFromEnv(process.env);
  // The control plane's stderr is a pipe into this process's stderr: it logs in the format this process would
  // (readable lines on a terminal), as it tells its agent child too.
  const env = { ...process.env, NDIF_LOG_FORMAT: logFormatFromEnv(process.env) };
  // The operator-grade secrets go to each control-plane process (which reads, then scrubs them); none stays in this
  // process's environment block, which the agent (same user) could read in /proc.
  const secrets = Object.keys(operatorSecretsOf(env));
  const left = secrets.filter((s) => !scrubOwnEnvironment(secrets).includes(s));
  if (left.length > 0)
    log.warn({ variables: left }, 'could not overwrite these secrets in the process environment block');
  const force = (code: number) => setTimeout(() => process.exit(code), 25_000).unref();
  const supervisor = new ControlPlaneSupervisor({
    log,
    env,
    restartDelayMs: config.controlPlaneRestartMs,
    onEnd: (code) => process.exit(code),
  });
  const stop = (signal: NodeJS.Signals) => {
    force(1);
    supervisor.stop(signal);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  supervisor.start();
} catch (err) {
  log.fatal({ err }, 'the fabric failed to start');
  process.stderr.write(`fabric: ${(err as Error).message}\n`);
  setTimeout(() => process.exit(1), 100);
}
