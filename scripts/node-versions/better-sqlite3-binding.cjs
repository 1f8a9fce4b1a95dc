// Preloaded (`--require`, through NODE_OPTIONS so every child process has it too) when the
// tests or the bench run on a Node other than the one the workspace was installed with:
// better-sqlite3 then loads the build made for this Node's ABI, named by
// ACEMQ_BETTER_SQLITE3_BINDING, instead of the one in node_modules, which stays the installing
// Node's. Nothing else is redirected. See node-versions.mjs.
'use strict'

const { existsSync } = require('node:fs')
const module_ = require('node:module')
const { pathToFileURL } = require('node:url')

const binding = process.env.ACEMQ_BETTER_SQLITE3_BINDING
if (binding !== undefined && binding !== '') {
  if (!existsSync(binding)) {
    throw new Error(`ACEMQ_BETTER_SQLITE3_BINDING names no file: ${JSON.stringify(binding)}`)
  }
  if (typeof module_.registerHooks !== 'function') {
    throw new Error(
      `ACEMQ_BETTER_SQLITE3_BINDING needs module.registerHooks (Node 22.15+), and this is Node ${process.versions.node}`,
    )
  }
  const installed = /[\\/]better-sqlite3[\\/]build[\\/]Release[\\/]better_sqlite3\.node$/
  const replacement = pathToFileURL(binding).href
  module_.registerHooks({
    resolve(specifier, context, nextResolve) {
      const resolved = nextResolve(specifier, context)
      return installed.test(resolved.url) ? { ...resolved, url: replacement } : resolved
    },
  })
}
