// The client's protocol version (x-ndif-protocol, or ?protocol= on websocket upgrades) must have the server's
// major; no version given is served (curl, browsers).
import {
  API_PROTOCOL_VERSION,
  COMPATIBILITY_RULE,
  isCompatibleProtocol,
  parseProtocolVersion,
} from '../protocol/api-version.js';
import { FabricError } from '../protocol/errors.js';
import { ApiErrorCode } from './errors.js';

export function checkClientProtocol(sent: string | string[] | undefined): void {
  if (sent === undefined || sent === '') return;
  const text = Array.isArray(sent) ? sent.join(',') : sent;
  if (parseProtocolVersion(text) === undefined) {
    throw new FabricError(
      ApiErrorCode.protocolMalformed,
      400,
      `the protocol version ${JSON.stringify(text.slice(0, 40))} is not <major>.<minor>`,
      {
        hint: `send x-ndif-protocol: ${API_PROTOCOL_VERSION}`,
        details: { server: API_PROTOCOL_VERSION, client: text.slice(0, 40) },
      },
    );
  }
  if (!isCompatibleProtocol(text, API_PROTOCOL_VERSION)) {
    throw new FabricError(
      ApiErrorCode.protocolMismatch,
      400,
      `this client speaks protocol ${text} and the server speaks ${API_PROTOCOL_VERSION}; they are compatible only with the ${COMPATIBILITY_RULE}`,
      {
        hint: 'install a client release for this server (GET /version tells its protocol)',
        details: { server: API_PROTOCOL_VERSION, client: text, rule: COMPATIBILITY_RULE },
      },
    );
  }
}
