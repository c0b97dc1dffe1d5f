// How a completed request's result is shown: inline (base64 of the result container) up to the inline limit,
// else a signed download URL valid for resultUrlTtlMs (naming the recorded request id: a token needs no key);
// once expired, when and why.
import type { RouteDeps } from '../../http/deps.js';
import { isFabricError } from '../../protocol/errors.js';
import { signResultToken } from './token.js';

export interface ResultRef {
  ref: string;
  bytes: number;
  sha256: string;
  /** Set once the result expired (its blob is deleted). */
  expiredAt?: string;
  expiredBecause?: 'RETENTION' | 'DELETED';
  /** The model files the attempt ran on (when the agent reported it). */
  weightsFingerprint?: string;
}

type Weights = { weightsFingerprint?: string };

export type ResultField =
  | ({ bytes: number; sha256: string; inline: string } & Weights)
  | ({ bytes: number; sha256: string; expiredAt: string; expired: 'RETENTION' | 'DELETED' } & Weights)
  | ({
      bytes: number;
      sha256: string;
      url: string;
      expiresAt: string;
      inlineError?: { code: string; message: string };
    } & Weights);

export function resultUrl(deps: RouteDeps, requestId: string, r: { ref: string }): { url: string; expiresAt: string } {
  const expiresAtMs = deps.ctx.clock() + deps.config.resultUrlTtlMs;
  const path = `/requests/${encodeURIComponent(requestId)}/result?token=${signResultToken(deps.config.resultSecret, requestId, r.ref, expiresAtMs)}`;
  return { url: `${deps.config.publicUrl ?? ''}${path}`, expiresAt: new Date(expiresAtMs).toISOString() };
}

/**
 * The result as shown to its reader. A blob that cannot be read for inlining is shown by URL with the reason
 * (the download then answers the blob store's error): a COMPLETED status is never lost to it.
 */
export async function resultField(deps: RouteDeps, requestId: string, r: ResultRef): Promise<ResultField> {
  const weights: Weights = r.weightsFingerprint === undefined ? {} : { weightsFingerprint: r.weightsFingerprint };
  if (r.expiredAt !== undefined)
    return {
      bytes: r.bytes,
      sha256: r.sha256,
      expiredAt: r.expiredAt,
      expired: r.expiredBecause ?? 'RETENTION',
      ...weights,
    };
  if (r.bytes <= deps.config.inlineResultMaxBytes) {
    try {
      const blob = await deps.ctx.blobs.get(r.ref);
      return { bytes: r.bytes, sha256: r.sha256, ...weights, inline: blob.bytes.toString('base64') };
    } catch (e) {
      const inlineError = isFabricError(e)
        ? { code: e.code, message: e.message }
        : { code: 'API_INTERNAL', message: e instanceof Error ? e.message : String(e) };
      deps.ctx.log.warn(
        { err: e, requestId, ref: r.ref },
        `result of ${requestId} could not be read for inlining: ${inlineError.message}`,
      );
      return { bytes: r.bytes, sha256: r.sha256, ...weights, ...resultUrl(deps, requestId, r), inlineError };
    }
  }
  return { bytes: r.bytes, sha256: r.sha256, ...weights, ...resultUrl(deps, requestId, r) };
}
