// What GET /models/:key/tokenizer answers, shared by the query API and the SDK: the model's tokenizer.json and
// tokenizer_config.json (null when it has none) as their text, and a sha256 over both, which is also the
// reply's ETag. The client checks the hash of what it received (and of what it cached) before using it. The hash
// is Web Crypto's (a global in every supported Node), so this file imports nothing.

export interface TokenizerBundle {
  model: string;
  /** Hex sha256 of tokenizer.json's UTF-8 bytes, a NUL byte, and tokenizer_config.json's (none when absent). */
  sha256: string;
  tokenizer: string;
  config: string | null;
}

export async function tokenizerBundleSha256(tokenizer: string, config: string | null): Promise<string> {
  const bytes = new TextEncoder().encode(`${tokenizer}\0${config ?? ''}`);
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The ETag of a bundle (a strong validator: the hash of the content). */
export function tokenizerEtag(sha256: string): string {
  return `"${sha256}"`;
}
