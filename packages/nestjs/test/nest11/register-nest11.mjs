import module from 'node:module'

// Where this Node has synchronous module hooks (22.15+), the redirect is one of them: a
// synchronous hook registered beside an asynchronous one (the preload that points better-sqlite3
// at another Node's build, scripts/node-versions) makes `import` resolve through both, and Node
// 22 cannot call an asynchronous hook from there (ERR_METHOD_NOT_IMPLEMENTED). Older Nodes take
// the asynchronous form.
if (typeof module.registerHooks === 'function') {
  const { resolveSync } = await import('./nest11-hooks.mjs')
  module.registerHooks({ resolve: resolveSync })
} else {
  module.register('./nest11-hooks.mjs', import.meta.url)
}
