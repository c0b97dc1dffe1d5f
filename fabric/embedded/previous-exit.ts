// What a control-plane process learns from its supervisor about the one before it (supervisor.ts): how it ended and
// how many restarts the fabric has had. Logged once at start, served in /metrics and in the operator's /cluster (and
// so `ndif status`).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ControlPlaneExit } from './supervisor.js';

export const PREVIOUS_EXIT_ENV = 'NDIF_CONTROL_PLANE_PREVIOUS_EXIT';

/** The previous process's end, read from (and removed from) `env`: no child process inherits it. */
export function takePreviousExit(env: NodeJS.ProcessEnv): ControlPlaneExit | undefined {
  const raw = env[PREVIOUS_EXIT_ENV];
  delete env[PREVIOUS_EXIT_ENV];
  if (raw === undefined || raw === '') return undefined;
  try {
    const j = JSON.parse(raw) as ControlPlaneExit;
    return typeof j.restarts === 'number' ? j : undefined;
  } catch {
    return undefined;
  }
}

/** How it ended, in words: `killed by SIGKILL`, `exit code 134`. */
export function describeExit(e: Pick<ControlPlaneExit, 'code' | 'signal'>): string {
  return e.signal !== null ? `killed by ${e.signal}` : `exit code ${e.code}`;
}

/**
 * `ndif_control_plane_restarts_total` (restarts since the fabric started) and
 * `ndif_control_plane_last_exit_timestamp_seconds{code,signal}` (when and how the last one that died ended).
 */
export function restartMetrics(registry: Registry, exit: ControlPlaneExit | undefined): void {
  const registers = [registry];
  const restarts = new Counter({
    name: 'ndif_control_plane_restarts_total',
    help: 'Times the embedded fabric restarted its control-plane process after it died (kill -9, a fatal error)',
    registers,
  });
  restarts.inc(exit?.restarts ?? 0);
  const last = new Gauge({
    name: 'ndif_control_plane_last_exit_timestamp_seconds',
    help: 'When the last control-plane process that died ended, labelled with its exit code or signal',
    labelNames: ['code', 'signal'],
    registers,
  });
  if (exit !== undefined)
    last.set({ code: String(exit.code ?? ''), signal: exit.signal ?? '' }, Date.parse(exit.at) / 1000);
}
