// The process-wide handlers of a process that runs blocks (the agent for trusted blocks, a sandbox runner for
// untrusted ones). A fault raised in a block's context — an exception thrown by a callback it scheduled, a promise
// it rejected that nothing handled — goes to that block's invoke (invoke-guard.ts) and fails only its request.
// Anything else is the process's own fault, and the process decides (`setProcessFaultPolicy`): the agent logs an
// unhandled rejection and carries on, and records an uncaught exception and exits once; a sandbox runner hands
// everything to its lowest open invoke. Without a policy, the process behaves as Node does without handlers:
// it prints the error and exits.
import { containBlockFault } from './invoke-guard.js';

export interface ProcessFaultPolicy {
  /** An exception no block caused (or a rejection turned into one). */
  exception(error: unknown): void;
  /** A rejection no block caused. */
  rejection(reason: unknown): void;
}

function describe(e: unknown): string {
  try {
    if (e instanceof Error) return e.stack ?? `${e.name}: ${e.message}`;
    return `uncaught value: ${String(e)}`;
  } catch {
    return 'uncaught value that cannot be shown';
  }
}

const nodeDefault: ProcessFaultPolicy = {
  exception(error) {
    process.stderr.write(`${describe(error)}\n`);
    process.exit(1);
  },
  rejection(reason) {
    this.exception(reason);
  },
};

let policy: ProcessFaultPolicy = nodeDefault;
let installed = false;

/** What the process does with faults no block caused. */
export function setProcessFaultPolicy(p: ProcessFaultPolicy): void {
  policy = p;
  installBlockFaultHandlers();
}

/** Installs the two process handlers once (idempotent). */
export function installBlockFaultHandlers(): void {
  if (installed) return;
  installed = true;
  process.on('uncaughtException', (error, origin) => {
    if (containBlockFault(error, origin === 'unhandledRejection' ? 'UnhandledRejection' : 'UncaughtException')) return;
    policy.exception(error);
  });
  process.on('unhandledRejection', (reason) => {
    if (containBlockFault(reason, 'UnhandledRejection')) return;
    policy.rejection(reason);
  });
}
