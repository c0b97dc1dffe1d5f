// A trusted block runs in its agent's own process. When the control plane fails such an attempt for its time limit
// while it runs, the agent is told to stop it, but a block in a synchronous loop cannot be stopped from inside: it
// keeps the agent's event loop until the agent's watchdog ends the process (about 0.5 s past the deadline). Until
// the agent reports that the block has stopped (`RequestRunStopped`) or it registers as a new boot, its agent takes
// no new work: a request sent there would wait behind the spin and then be requeued by the restart.

/** The error type an agent reports the end of a run with when the control plane had already ended the attempt. */
export const RUN_STOPPED = 'RunStopped';

/** The failure leaves the attempt's in-process block possibly still running on its agent. */
export function leavesBlockRunning(
  request: { trusted: boolean; isolated: boolean },
  failed: { reportedBy: 'agent' | 'scheduler'; phase: string; errorType: string },
): boolean {
  return (
    request.trusted &&
    !request.isolated &&
    failed.reportedBy === 'scheduler' &&
    failed.phase === 'execution' &&
    failed.errorType === 'Timeout'
  );
}
