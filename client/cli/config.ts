// The CLI's resolved settings: where the fabric is, which key, and whether to print JSON.
import type { ClientConfig } from '../sdk/config.js';

export interface ResolvedConfig extends ClientConfig {
  json: boolean;
}
