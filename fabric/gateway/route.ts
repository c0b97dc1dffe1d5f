// Which API process a call goes to behind the gateway: the command API takes every call that changes something
// (POST …) and the key listing (GET /keys); the query API takes the other reads and the status websocket.
export type Upstream = 'command' | 'query';

export function upstreamOf(method: string, url: string, upgrade: boolean): Upstream {
  if (upgrade) return 'query';
  if (method !== 'GET' && method !== 'HEAD') return 'command';
  const path = url.split('?', 1)[0]!;
  return path === '/keys' || path.startsWith('/keys/') ? 'command' : 'query';
}
