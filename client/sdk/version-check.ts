// The version handshake (docs/http-api.md): read /version once and refuse a fabric of another protocol major.
import { isCompatibleProtocol } from '../../protocol/api-version.js';
import { ProtocolMismatchError } from './errors.js';
import type { FabricHttp } from './http.js';
import type { VersionReply } from './wire.js';

/** A memoised check: the first call asks /version, later calls get the same answer (a failed ask is retried). */
export function versionChecker(http: FabricHttp): () => Promise<VersionReply> {
  let pending: Promise<VersionReply> | null = null;
  return () => {
    pending ??= http.json<VersionReply>('GET', '/version').then(
      (v) => {
        const server = typeof v?.protocol === 'string' ? v.protocol : null;
        if (server === null || !isCompatibleProtocol(http.protocolVersion, server))
          throw new ProtocolMismatchError(http.url, http.protocolVersion, server);
        return v;
      },
      (e) => {
        pending = null;
        throw e;
      },
    );
    return pending;
  };
}
