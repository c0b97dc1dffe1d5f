// Where the client's URL and API key come from: an explicit value, else the environment, else the default.
export const DEFAULT_URL = 'http://127.0.0.1:8080';

export interface ClientConfig {
  url: string;
  urlSource: 'option' | 'env NDIF_URL' | 'default';
  apiKey: string | null;
  apiKeySource: 'option' | 'env NDIF_API_KEY' | 'none';
}

export function resolveClientConfig(
  given: { url?: string | null; apiKey?: string | null },
  env: Record<string, string | undefined> = process.env,
): ClientConfig {
  const envUrl = env.NDIF_URL?.trim();
  const envKey = env.NDIF_API_KEY?.trim();
  const url = given.url
    ? { url: given.url, urlSource: 'option' as const }
    : envUrl
      ? { url: envUrl, urlSource: 'env NDIF_URL' as const }
      : { url: DEFAULT_URL, urlSource: 'default' as const };
  const key = given.apiKey
    ? { apiKey: given.apiKey, apiKeySource: 'option' as const }
    : envKey
      ? { apiKey: envKey, apiKeySource: 'env NDIF_API_KEY' as const }
      : { apiKey: null, apiKeySource: 'none' as const };
  return { ...url, ...key };
}

/** `abcd…wxyz` — enough to tell keys apart, never the key. */
export function maskKey(key: string | null): string | null {
  if (key === null) return null;
  return key.length <= 8 ? '*'.repeat(key.length) : `${key.slice(0, 4)}…${key.slice(-4)}`;
}
