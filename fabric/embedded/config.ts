// Settings of the embedded fabric (`npm start`), from its environment:
//   NDIF_DATA_DIR     where the event store, API keys and blobs live (default ./data); state survives restarts
//   NDIF_PORT         HTTP port (default 8080; 0 picks a free one, the printed URL says which)
//   NDIF_HOST         interface to bind (default 127.0.0.1)
//   NDIF_AGENT        on (default) | off: start the GPU agent child process
//   NDIF_AGENT_ID     the child agent's id (default local-agent); NDIF_AGENT_GPUS, NDIF_AGENT_RAM… pass through
//   NDIF_MODELS       models besides the bundled gpt2-tiny (see catalog/config.ts)
//   NDIF_AGENT_RESTART_MS  first delay before a dead agent child is started again (default 500; doubles up to 10 s)
//   NDIF_AGENT_RESTART_RESET_MS  after running this long, a dead agent child gets the first delay again (default 60000)
//   NDIF_CONTROL_PLANE_RESTART_MS  first delay before a dead control-plane process is started again (default 500;
//                     doubles up to 10 s, back to the first after a minute of running)
//   NDIF_SCHEDULER_*, NDIF_ONDEMAND_*  the scheduler's timing knobs (fabric/scheduler-env.ts)
// plus the API settings of docs/http-api.md (NDIF_AUTH, default off here; NDIF_RATE_LIMIT, …).
import { join, resolve } from 'node:path';
import { FabricError } from '../../protocol/errors.js';

export interface EmbeddedConfig {
  dataDir: string;
  port: number;
  host: string;
  agent: boolean;
  agentId: string;
  /** First restart delay of the agent child (ms). */
  agentRestartMs: number;
  /** Running time after which the restart delay starts over (ms). */
  agentRestartResetMs: number;
  /** First restart delay of the control-plane process (ms). */
  controlPlaneRestartMs: number;
}

function invalid(name: string, value: string, accepts: string): FabricError {
  return new FabricError('FABRIC_CONFIG_INVALID', 500, `${name}=${JSON.stringify(value)} is not valid: ${accepts}`, {
    hint: `fix ${name} or unset it for the default`,
  });
}

export function embeddedConfigFromEnv(env: NodeJS.ProcessEnv = process.env): EmbeddedConfig {
  const rawPort = env.NDIF_PORT ?? '8080';
  const port = Number(rawPort);
  if (!/^[0-9]+$/.test(rawPort) || port > 65535) throw invalid('NDIF_PORT', rawPort, 'a port number from 0 to 65535');
  const agent = env.NDIF_AGENT ?? 'on';
  if (agent !== 'on' && agent !== 'off') throw invalid('NDIF_AGENT', agent, 'on or off');
  const rawRestart = env.NDIF_AGENT_RESTART_MS || '500';
  const agentRestartMs = Number(rawRestart);
  if (!/^[0-9]+$/.test(rawRestart) || agentRestartMs < 10 || agentRestartMs > 10_000)
    throw invalid('NDIF_AGENT_RESTART_MS', rawRestart, 'milliseconds from 10 to 10000');
  const rawReset = env.NDIF_AGENT_RESTART_RESET_MS || '60000';
  const agentRestartResetMs = Number(rawReset);
  if (!/^[0-9]+$/.test(rawReset) || agentRestartResetMs < 100)
    throw invalid('NDIF_AGENT_RESTART_RESET_MS', rawReset, 'milliseconds, at least 100');
  const rawCpRestart = env.NDIF_CONTROL_PLANE_RESTART_MS || '500';
  const controlPlaneRestartMs = Number(rawCpRestart);
  if (!/^[0-9]+$/.test(rawCpRestart) || controlPlaneRestartMs < 10 || controlPlaneRestartMs > 10_000)
    throw invalid('NDIF_CONTROL_PLANE_RESTART_MS', rawCpRestart, 'milliseconds from 10 to 10000');
  return {
    dataDir: resolve(env.NDIF_DATA_DIR || 'data'),
    controlPlaneRestartMs,
    port,
    host: env.NDIF_HOST || '127.0.0.1',
    agent: agent === 'on',
    agentId: env.NDIF_AGENT_ID || 'local-agent',
    agentRestartMs,
    agentRestartResetMs,
  };
}

export const paths = (c: EmbeddedConfig) => ({
  events: join(c.dataDir, 'events.sqlite'),
  keys: join(c.dataDir, 'keys.sqlite'),
  blobs: join(c.dataDir, 'blobs'),
});
