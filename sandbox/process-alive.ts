// Whether a process still runs, from /proc: a zombie (killed, not yet reaped by its parent) does not. A sweep of a
// dead agent's leftovers reads this; an agent killed by its supervisor stays a zombie until the supervisor's
// event loop reaps it, and its leftovers are already safe to remove then.
import { readFileSync } from 'node:fs';

export function processRunning(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  // "<pid> (<comm>) <state> …": comm may hold spaces and parentheses, the state follows the last ')'.
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}
