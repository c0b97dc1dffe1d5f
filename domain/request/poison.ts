// Poison requests: a request in flight when its agent died of something that points at what it was running is a
// suspect; its next attempt runs isolated (alone on its agent, in a sandbox runner where the agent has one). A
// second such death with it in flight — the agent again, or the sandbox runner of the isolated attempt — fails it
// with AGENT_CRASHED_BY_REQUEST and it is never requeued again. The failure carries the evidence: each death's
// agent, boots, exit code or signal, last words, last stderr lines.
//
// Which deaths point at the requests in flight (`implicates`): a crash signal (SIGABRT, SIGSEGV, …), a non-zero exit
// code, or last words that name the request (the watchdog's stall, the agent's own uncaught fault). Not: a SIGKILL
// or SIGTERM without last words (an operator, the OOM killer, a host shutting down), a clean exit, an agent lost
// without a restart or whose exit nobody observed — those requeue the request as any interruption does.
import type { CrashEvidence, RequeueReason } from '../events/index.js';

export const POISON_ERROR_TYPE = 'AGENT_CRASHED_BY_REQUEST';

const CRASH_SIGNALS = new Set(['SIGABRT', 'SIGSEGV', 'SIGBUS', 'SIGILL', 'SIGFPE', 'SIGTRAP', 'SIGSYS']);

/** Whether this death is evidence against `requestId`, which was in flight when it happened. */
export function implicates(crash: Omit<CrashEvidence, 'attempt' | 'suspect'>, requestId: string): boolean {
  const x = crash.exit;
  if (x === null) return false;
  if (x.cause !== null) return x.running.length === 0 || x.running.includes(requestId);
  if (x.signal !== null) return CRASH_SIGNALS.has(x.signal);
  return x.code !== null && x.code !== 0;
}

/** Requeue reasons that mean the agent process died (or vanished) under the attempt. */
export function isAgentDeath(reason: RequeueReason): boolean {
  return reason === 'AGENT_RESTARTED' || reason === 'AGENT_LOST';
}

const short = (id: string) => (id.length > 12 ? id.slice(0, 8) : id);

/** One death, for people: `agent a1 died (boot 1a2b3c4d → 5e6f7a8b; signal SIGABRT; last stderr: …)`. */
export function describeCrash(c: CrashEvidence): string {
  const facts: string[] = [
    c.nextBootId === null
      ? `boot ${short(c.bootId)}, lost: no heartbeat and no restart`
      : `boot ${short(c.bootId)} → ${short(c.nextBootId)}`,
  ];
  const x = c.exit;
  if (x?.signal) facts.push(`signal ${x.signal}`);
  else if (x?.code !== null && x?.code !== undefined) facts.push(`exit code ${x.code}`);
  if (x?.cause) facts.push(`its last words: ${x.cause.split('\n')[0]!.slice(0, 300)}`);
  const tail = x?.stderrTail.filter((l) => l.trim() !== '').slice(-2);
  if (tail && tail.length > 0) facts.push(`last stderr: ${tail.join(' | ').slice(0, 300)}`);
  return `agent ${c.agentId} died during attempt ${c.attempt} (${facts.join('; ')})${c.suspect === false ? ', of nothing that points at this request' : ''}`;
}

/** The message of the final failure: every death, then how the isolated attempt ended. */
export function poisonMessage(requestId: string, crashes: CrashEvidence[], finalAttempt: string): string {
  return (
    `request ${requestId} crashed its agent: ${crashes.map(describeCrash).join('; then ')}; ${finalAttempt}. ` +
    'It is not requeued again (other requests were not held back by it). Look for what kills the process — a native fault, ' +
    'process.abort(), exhausted memory — and see `ndif why ' +
    requestId +
    '`'
  );
}
