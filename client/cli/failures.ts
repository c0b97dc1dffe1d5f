// How the CLI reports a failure: one message on stderr that says what failed and what to do, and the exit code.
import {
  CancelledError,
  FabricHttpError,
  ProtocolMismatchError,
  RemoteError,
  UnreachableError,
} from '../sdk/errors.js';
import { UsageError } from './command.js';
import { ExitCode } from './exit-codes.js';

/** A deploy or scale that was refused or did not become READY in time; carries what the fabric said. */
export class NotReadyError extends Error {
  override readonly name = 'NotReadyError';
  constructor(
    message: string,
    readonly details: Record<string, unknown>,
  ) {
    super(message);
  }
}

export class InterruptedError extends Error {
  override readonly name = 'InterruptedError';
  constructor() {
    super('interrupted');
  }
}

export function exitCodeOf(e: unknown): number {
  if (e instanceof UsageError) return ExitCode.usage;
  if (e instanceof UnreachableError) return ExitCode.unreachable;
  if (e instanceof ProtocolMismatchError) return ExitCode.protocolMismatch;
  if (e instanceof NotReadyError) return ExitCode.notReady;
  if (e instanceof InterruptedError || (e instanceof Error && e.name === 'AbortError')) return ExitCode.interrupted;
  return ExitCode.failed;
}

export function renderError(e: unknown, command: string | null): string {
  const prefix = `ndif${command ? ` ${command}` : ''}: `;
  if (e instanceof FabricHttpError) {
    const lines = [`${prefix}${e.code}: ${e.remoteMessage}`];
    if (e.hint) lines.push(`  hint: ${e.hint}`);
    if (e.details && Object.keys(e.details).length) lines.push(`  details: ${JSON.stringify(e.details)}`);
    if (e.status === 401 || e.status === 403)
      lines.push('  (the API key comes from --api-key or $NDIF_API_KEY; `ndif env` shows which one is used)');
    return `${lines.join('\n')}\n`;
  }
  if (
    e instanceof RemoteError ||
    e instanceof CancelledError ||
    e instanceof UnreachableError ||
    e instanceof ProtocolMismatchError ||
    e instanceof UsageError
  ) {
    return `${prefix}${e.message}\n`;
  }
  if (e instanceof NotReadyError) return `${prefix}${e.message}\n`;
  if (e instanceof InterruptedError || (e instanceof Error && e.name === 'AbortError')) return `${prefix}interrupted\n`;
  const err = e instanceof Error ? e : new Error(String(e));
  return `${prefix}${err.message}\n${process.env.NDIF_DEBUG ? `${err.stack}\n` : ''}`;
}
