import {
  createConsoleHandler,
  type ConsoleHandler,
  type ConsoleOptions,
} from './console-handler.js'

/**
 * The console for Express: `app.use('/console', acemqConsole(options))`. Links follow the
 * mount path (`req.baseUrl`). A body Express parsed already (`express.urlencoded()`) is read
 * from `req.body`.
 *
 * @example
 * ```ts
 * app.use('/ops/dead-letters', acemqConsole({ archive, authorize: (req) => ({ actor: req.user.name }) }))
 * ```
 */
export function acemqConsole(options: ConsoleOptions): ConsoleHandler {
  return createConsoleHandler(options)
}
