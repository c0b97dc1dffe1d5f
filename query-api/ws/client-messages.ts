// Messages a status websocket client sends (docs/http-api.md, "Status websocket").
import { z } from 'zod';
import { REQUEST_ID } from '../../domain/shared/ids.js';

const requestId = z
  .string()
  .regex(REQUEST_ID, 'a request id: 1–160 of letters, digits and . _ : -, starting with a letter or digit');

export const clientMessage = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('subscribe'),
    requestId,
    since: z.union([z.string().max(64), z.number()]).optional(),
    /**
     * `binary`: a COMPLETED result follows its message as one binary frame (no base64). `stream`: as `binary`, and a
     * result the agent writes piece by piece is announced by RESULT_WRITING (its download URL) while it is written,
     * and its COMPLETED says `streamed: true` instead of carrying it. Default `inline`.
     */
    results: z.enum(['inline', 'binary', 'stream']).optional(),
    /** `final`: only LOG, STREAM, TRACE and the final status are sent (no RECEIVED … RUNNING). Default `all`. */
    statuses: z.enum(['all', 'final']).optional(),
  }),
  z.strictObject({ type: z.literal('unsubscribe'), requestId }),
  z.strictObject({ type: z.literal('watch'), topic: z.literal('cluster') }),
  z.strictObject({ type: z.literal('ping') }),
]);

export type ClientMessage = z.infer<typeof clientMessage>;
