// Error codes of the forensics services (`why`, `replay`, `audit`); listed in docs/errors.md ("Forensics").
import { FabricError } from '../protocol/errors.js';

export const ForensicsErrorCode = {
  whyBadId: 'WHY_BAD_ID',
  whyNotFound: 'WHY_NOT_FOUND',
  replayBadTarget: 'REPLAY_BAD_TARGET',
  replayBeyondHead: 'REPLAY_BEYOND_HEAD',
  replayTooLarge: 'REPLAY_TOO_LARGE',
  replayBusy: 'REPLAY_BUSY',
  auditFilterNotRecorded: 'AUDIT_FILTER_NOT_RECORDED',
  auditFilterNotIndexed: 'AUDIT_FILTER_NOT_INDEXED',
  auditNoFilter: 'AUDIT_NO_FILTER',
  auditBadFilter: 'AUDIT_BAD_FILTER',
} as const;
export type ForensicsErrorCodeValue = (typeof ForensicsErrorCode)[keyof typeof ForensicsErrorCode];

const STATUS: Record<ForensicsErrorCodeValue, number> = {
  WHY_BAD_ID: 400,
  WHY_NOT_FOUND: 404,
  REPLAY_BAD_TARGET: 400,
  REPLAY_BEYOND_HEAD: 400,
  REPLAY_TOO_LARGE: 413,
  REPLAY_BUSY: 429,
  AUDIT_FILTER_NOT_RECORDED: 400,
  AUDIT_FILTER_NOT_INDEXED: 400,
  AUDIT_NO_FILTER: 400,
  AUDIT_BAD_FILTER: 400,
};

export function forensicsError(
  code: ForensicsErrorCodeValue,
  message: string,
  opts: { hint?: string; details?: Record<string, unknown>; cause?: unknown } = {},
): FabricError {
  return new FabricError(code, STATUS[code], message, opts);
}
