// better-sqlite3 builds from source when no prebuilt binary can be downloaded, and node-gyp
// then downloads Node's headers unless it is told where they are. pnpm reads no `nodedir`
// from .npmrc, so this hook hands every lifecycle script `npm_config_nodedir`, pointing at the
// headers installed beside the Node that runs the install (`/usr/include/node` for
// `/usr/bin/node`), when they are there and are that Node's own. A `npm_config_nodedir` set in
// the environment wins; without local headers node-gyp downloads them as it always does.
'use strict'

const { existsSync, readFileSync } = require('node:fs')
const { dirname, join } = require('node:path')

/** The prefix whose `include/node` holds this Node's headers, or undefined. */
function localNodeDir() {
  const prefix = dirname(dirname(process.execPath))
  const versionHeader = join(prefix, 'include', 'node', 'node_version.h')
  if (!existsSync(versionHeader)) return undefined
  const source = readFileSync(versionHeader, 'utf8')
  const version = ['MAJOR', 'MINOR', 'PATCH']
    .map((part) => new RegExp(`#define NODE_${part}_VERSION (\\d+)`).exec(source)?.[1])
    .join('.')
  return version === process.versions.node ? prefix : undefined
}

module.exports = {
  hooks: {
    updateConfig(config) {
      if (process.env.npm_config_nodedir) return config
      const nodedir = localNodeDir()
      if (nodedir === undefined) return config
      return { ...config, extraEnv: { ...config.extraEnv, npm_config_nodedir: nodedir } }
    },
  },
}
