// The IPC transport: the embedded fabric's agent process reaches the control plane's in-process broker over a
// Unix socket. See docs/transport.md ("IPC adapter").
export { IpcTransport, type IpcTransportOptions } from './client.js';
export { IpcTransportServer, type IpcServerOptions } from './server.js';
export { MAX_IPC_FRAME_BYTES } from './frames.js';
