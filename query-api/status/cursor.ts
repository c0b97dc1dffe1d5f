// Websocket cursors (docs/http-api.md, "Ordering and cursors"): the event-store position a status message
// reflects, and for a waiting request also its status and queue position, so a client resubscribing with the
// last cursor it received is sent exactly what it has not seen.
import { FabricError } from '../../protocol/errors.js';

export type WaitingStatus = 'QUEUED' | 'PROVISIONING' | 'DEPLOYING';

export interface Cursor {
  position: number;
  /** `<status>:<position|->` of the waiting status the message said, when it said one. */
  waitingKey: string | null;
}

export const waitingKeyOf = (status: WaitingStatus, position: number | null): string => `${status}:${position ?? '-'}`;

export function formatCursor(position: number, waitingKey: string | null): string {
  return waitingKey === null ? String(position) : `${position}:${waitingKey}`;
}

const CURSOR = /^(0|[1-9][0-9]{0,15})(?::(QUEUED|PROVISIONING|DEPLOYING):(-|0|[1-9][0-9]{0,9}))?$/;

/** Parses a cursor a client sends back (a bare position is accepted too); throws WS_BAD_CURSOR. */
export function parseCursor(text: unknown): Cursor {
  const s = typeof text === 'number' && Number.isSafeInteger(text) && text >= 0 ? String(text) : text;
  const m = typeof s === 'string' ? CURSOR.exec(s) : null;
  if (m === null || !Number.isSafeInteger(Number(m[1]))) {
    throw new FabricError(
      'WS_BAD_CURSOR',
      400,
      `${JSON.stringify(typeof text === 'string' ? text.slice(0, 60) : text)} is not a cursor`,
      {
        hint: 'send back the "cursor" of the last status message received, or leave "since" out for the whole history',
      },
    );
  }
  return { position: Number(m[1]), waitingKey: m[2] === undefined ? null : `${m[2]}:${m[3]}` };
}
