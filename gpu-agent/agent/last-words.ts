// How an agent process's end reaches the control plane. A process that is about to go on purpose (an uncaught fault
// in its own code, the watchdog finding its event loop blocked) writes its last words — the cause and the requests
// it was running — to a file in its state folder; the next boot of the same agent reads them (and removes the file),
// adds what its supervisor saw (NDIF_AGENT_PREVIOUS_EXIT: exit code or signal, last stderr lines, set by the
// embedded fabric's agent child), and sends them with its registration (AgentRegistered.previousExit). A native
// crash writes nothing; its supervisor's part still says how it ended.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentExit } from '../../domain/events/index.js';

export interface LastWords {
  agentId: string;
  bootId: string;
  at: string;
  cause: string;
  running: string[];
}

/** What a supervisor saw of the previous process (NDIF_AGENT_PREVIOUS_EXIT). */
export interface SupervisorExit {
  bootId: string;
  code: number | null;
  signal: string | null;
  stderrTail: string[];
}

export function lastWordsFile(stateDir: string, agentId: string): string {
  return join(stateDir, `agent-${agentId.replace(/[^A-Za-z0-9._-]/g, '_')}.last-words.json`);
}

/** Synchronous: it runs as the process goes. Never throws. */
export function writeLastWords(file: string, words: LastWords): boolean {
  try {
    mkdirSync(join(file, '..'), { recursive: true, mode: 0o700 });
    writeFileSync(file, JSON.stringify(words), { mode: 0o600 });
    return true;
  } catch {
    return false;
  }
}

/** The last words left by the previous process of this agent, removed once read; undefined if there are none. */
export function takeLastWords(file: string): LastWords | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  rmSync(file, { force: true });
  try {
    const w = JSON.parse(text) as Partial<LastWords>;
    if (typeof w.bootId !== 'string' || typeof w.cause !== 'string') return undefined;
    return {
      agentId: String(w.agentId ?? ''),
      bootId: w.bootId,
      at: String(w.at ?? ''),
      cause: w.cause,
      running: Array.isArray(w.running) ? w.running.map(String) : [],
    };
  } catch {
    return undefined;
  }
}

export function supervisorExitFromEnv(env: NodeJS.ProcessEnv): SupervisorExit | undefined {
  const raw = env.NDIF_AGENT_PREVIOUS_EXIT;
  if (!raw) return undefined;
  try {
    const x = JSON.parse(raw) as Partial<SupervisorExit>;
    if (typeof x.bootId !== 'string' || x.bootId === '') return undefined;
    return {
      bootId: x.bootId,
      code: typeof x.code === 'number' ? x.code : null,
      signal: typeof x.signal === 'string' ? x.signal : null,
      stderrTail: Array.isArray(x.stderrTail) ? x.stderrTail.map(String) : [],
    };
  } catch {
    return undefined;
  }
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The previous boot's end, from whichever of the two sources know it (the supervisor's boot wins when they differ). */
export function previousExit(
  supervisor: SupervisorExit | undefined,
  words: LastWords | undefined,
): AgentExit | undefined {
  const bootId = supervisor?.bootId ?? words?.bootId;
  if (bootId === undefined) return undefined;
  const w = words?.bootId === bootId ? words : undefined;
  return {
    bootId,
    code: supervisor?.code ?? null,
    signal: supervisor?.signal ?? null,
    cause: w ? clip(w.cause, 4000) : null,
    stderrTail: (supervisor?.stderrTail ?? []).slice(-40).map((l) => clip(l, 1000)),
    running: (w?.running ?? []).slice(0, 256),
  };
}
