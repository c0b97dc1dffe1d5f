// The HTTP/websocket protocol version shared by the APIs and their clients (docs/http-api.md, "Version
// handshake"): `<major>.<minor>`; a client and a server are compatible iff their majors are equal. Minor
// versions only add fields, routes and capabilities.

export const API_PROTOCOL_VERSION = '1.0';

/** The header a client sends its protocol version in (and every response carries the server's). */
export const PROTOCOL_HEADER = 'x-ndif-protocol';

export const COMPATIBILITY_RULE = 'same protocol major';

export interface ProtocolVersion {
  major: number;
  minor: number;
}

/** Parses `<major>.<minor>` (non-negative integers); undefined when it is not one. */
export function parseProtocolVersion(text: string): ProtocolVersion | undefined {
  const m = /^(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$/.exec(text);
  if (m === null) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]) };
}

/** True when the two versions may talk to each other (same major). Malformed versions are never compatible. */
export function isCompatibleProtocol(a: string, b: string): boolean {
  const pa = parseProtocolVersion(a);
  const pb = parseProtocolVersion(b);
  return pa !== undefined && pb !== undefined && pa.major === pb.major;
}
