// The `ndif` CLI's exit codes (docs/cli.md lists them).
export const ExitCode = {
  ok: 0,
  /** The fabric refused the command or the operation failed (an error body, a failed request). */
  failed: 1,
  /** Bad usage: unknown command or option, a missing or malformed argument. */
  usage: 2,
  /** Nothing answers at the fabric's URL. */
  unreachable: 3,
  /** A deploy (or scale) was refused, or its replicas were not READY within --wait. */
  notReady: 4,
  /** The fabric speaks another protocol version. */
  protocolMismatch: 5,
  /** Interrupted (Ctrl-C) while waiting. */
  interrupted: 130,
} as const;

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];
