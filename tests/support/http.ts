// HTTP headers the API tests send.

/** The Authorization header of an API key. */
export const bearer = (key: string): { authorization: string } => ({ authorization: `Bearer ${key}` });
