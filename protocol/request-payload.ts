// What a submitted request asks the GPU agent to run: the `payload` of RequestReceived, written by the command
// API (docs/http-api.md, "What the agent receives") and read by the agent. The control plane treats it as opaque.

export const REQUEST_PAYLOAD_FORMAT = 'ndif-request/1';

export interface PayloadInvoke {
  /** Text to tokenize with the model's tokenizer … */
  prompt?: string;
  /** … or token ids (exactly one of the two). */
  tokens?: number[];
  /** This invoke's block source; absent: the shared `block`, else none (the invoke only runs the model). */
  block?: string;
}

export interface RequestPayload {
  format: typeof REQUEST_PAYLOAD_FORMAT;
  invokes: PayloadInvoke[];
  /** The block of every invoke that has none of its own. */
  block?: string;
  /** Tokens to generate greedily (0: one forward pass). */
  newTokens: number;
  /** Execution limit the user asked for (the control plane enforces it too); null: the deployment's. */
  timeoutMs: number | null;
  /** The client waits on the websocket (true) or polls GET /requests/:id (false). */
  blocking: boolean;
}

/** The block source invoke `i` runs, or undefined when it runs none. */
export function blockOfInvoke(p: RequestPayload, i: number): string | undefined {
  return p.invokes[i]?.block ?? p.block;
}
