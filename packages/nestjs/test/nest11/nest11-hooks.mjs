import { URL } from 'node:url'

// Resolves every `@nestjs/*` import from this directory, so the package's source — which would
// find the workspace's Nest 12 beside it — runs against Nest 11. Nest's own CommonJS files
// require each other from their own install, which pnpm made from this package's Nest 11.
const here = new URL('./package.json', import.meta.url).href

/** The asynchronous hook (`module.register`). */
export async function resolve(specifier, context, next) {
  return resolveSync(specifier, context, next)
}

/** The same redirect as a synchronous hook (`module.registerHooks`). */
export function resolveSync(specifier, context, next) {
  if (specifier.startsWith('@nestjs/')) return next(specifier, { ...context, parentURL: here })
  return next(specifier, context)
}
