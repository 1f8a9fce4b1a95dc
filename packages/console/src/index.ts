export {
  MAX_FORM_BYTES,
  createConsoleHandler,
  type ConsoleHandler,
  type ConsoleOptions,
} from './console-handler.js'
export { PAYLOAD_SHOWN_BYTES, type ConsoleQueue } from './pages.js'
export {
  CONTENT_SECURITY_POLICY,
  SESSION_COOKIE,
  isLoopback,
  type AuthorizeHook,
  type ConsoleAuthOptions,
  type ConsoleUser,
} from './security.js'
export { serveConsole, type ConsoleServer, type ServeConsoleOptions } from './serve-console.js'
