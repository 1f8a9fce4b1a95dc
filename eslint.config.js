import js from '@eslint/js'
import tseslint from 'typescript-eslint'

// --- Boundaries (docs/design.md §1, "Layers") -------------------------------------------------
// Inside core, a folder imports only the folders of the layers below its own: never one of its
// own layer, never one above. Folders are matched by name in the import path (core's folder
// names are unique), so `../ordered/…` and `../../ordered/…` are both caught.
const CORE_LAYERS = [
  // Foundation: the root files errors, error-codes, constants and duration, and these.
  ['internal', 'headers', 'redaction'],
  // Parts that know nothing of each other.
  ['codec', 'retry', 'health', 'sql', 'envelope', 'transport', 'shutdown'],
  // Parts built on one of those.
  ['topology', 'telemetry', 'idempotency', 'claim-check'],
  // The engine: the consumer, then the publisher, which runs the connection's interceptors
  // (declared with the consumer's, one interface for both sides).
  ['consumer'],
  // Payload schemas: a consumer's handler wrapped, a publisher's payloads checked.
  ['schema'],
  ['publisher'],
  // Features built on the engine.
  ['ordered', 'outbox', 'replay', 'request-reply', 'scheduler'],
  // Features built on features (a pipeline names its keys as the ordered queue does; the
  // dead-letter archive replays as a replay does).
  ['pipeline', 'archive'],
  // The connection's own parts, under the facade (its close sequence).
  ['connection'],
]
// ace-mq.ts, index.ts and spi.ts are the facade above every layer; nothing imports them.
const CORE_FACADE = ['ace-mq', 'index', 'spi']
const FOUNDATION_FILES = ['errors', 'error-codes', 'constants', 'duration']

/** A relative import of one of `folders` (a core folder, or a root file when `files`). */
function importOf(names, files = false) {
  const tail = files ? '\\.js$' : '(?:/|$)'
  return `^(?:\\./|(?:\\.\\./)+)(?:${names.join('|')})${tail}`
}

const DRIVERS = {
  regex: '^(?:amqplib|pg|kysely|better-sqlite3|mysql2|@opentelemetry/.*|express|fastify)(?:/|$)',
  message: '@acemq/core knows no driver: an adapter accepts the slice of the driver it needs.',
}
const CORE_PACKAGE_RULES = [
  DRIVERS,
  { regex: '^@acemq/', message: '@acemq/core depends on no other package.' },
]
const FACADE_RULE = {
  regex: importOf(CORE_FACADE, true),
  message: 'Nothing inside core imports its facade (ace-mq.ts, index.ts, spi.ts).',
}

/** What the files of core folder `folder` may not import: every folder not below its layer. */
function coreFolderRules(folder, allowance = []) {
  const layer = CORE_LAYERS.findIndex((names) => names.includes(folder))
  const above = CORE_LAYERS.slice(layer)
    .flat()
    .filter((name) => name !== folder && !allowance.some((a) => a.folder === name))
  const rules = [...CORE_PACKAGE_RULES, FACADE_RULE]
  if (above.length > 0) {
    rules.push({
      regex: importOf(above),
      message: `core/${folder} may import only the layers below its own (docs/design.md §1): not its own layer's folders, not the ones above.`,
    })
  }
  for (const { folder: name, file } of allowance) {
    rules.push({
      regex: `^(?:\\.\\./)+${name}/(?!${file.replaceAll('.', '\\.')}$)`,
      message: `core/${folder} may import only the layers below its own (docs/design.md §1).`,
    })
  }
  return rules
}

/** Another package through a relative path instead of its name. */
const RELATIVE_PACKAGE = {
  regex: '^(?:\\.\\./)+(?:packages/)?[\\w-]+/(?:src|dist)(?:/|$)',
  message: 'Import another package by its name, not by a path into it.',
}
const ADAPTER_RULES = [
  RELATIVE_PACKAGE,
  {
    regex: '^@acemq/(?!core(?:/spi)?$)',
    message:
      'An adapter depends on @acemq/core only, never on another adapter (docs/design.md §1).',
  },
]
const CLI_RULES = [
  RELATIVE_PACKAGE,
  {
    regex: '^@acemq/(?!core(?:/spi)?$|transport-amqp$)',
    message:
      'The cli depends on @acemq/core and @acemq/transport-amqp only, never on a store (docs/design.md §1).',
  },
]

const restrict = (files, patterns) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns }] },
})

const boundaries = [
  restrict(['packages/core/src/*.ts'], CORE_PACKAGE_RULES),
  restrict(
    FOUNDATION_FILES.map((name) => `packages/core/src/${name}.ts`),
    [
      ...CORE_PACKAGE_RULES,
      FACADE_RULE,
      {
        regex: importOf(CORE_LAYERS.slice(1).flat()),
        message: 'The foundation files import only the foundation (docs/design.md §1).',
      },
    ],
  ),
  ...CORE_LAYERS.flat().map((folder) =>
    restrict([`packages/core/src/${folder}/**/*.ts`], coreFolderRules(folder)),
  ),
  restrict(
    [
      'packages/{transport-amqp,store-kysely,store-sqlite,otel,health-express,health-fastify,console,testing}/src/**/*.ts',
    ],
    ADAPTER_RULES,
  ),
  restrict(['packages/cli/src/**/*.ts'], CLI_RULES),
]

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'docs/api/**',
      'coverage/**',
      'reports/**',
      '.stryker-tmp/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-console': 'off',
    },
  },
  {
    // The closed set of error codes (docs/errors.md): a package's source names a code through
    // ErrorCodes, so a typo or a code outside the set cannot be written.
    files: ['packages/*/src/**/*.ts'],
    ignores: ['packages/core/src/error-codes.ts', 'packages/testing/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'Literal[value=/^ACEMQ_[A-Z_]+$/]',
          message: 'Name an error code through ErrorCodes (@acemq/core), not as a string.',
        },
      ],
    },
  },
  ...boundaries,
  {
    // No source file over 600 lines (docs/design.md §1): every line counts, blank and comment
    // lines too, so the limit is the file's length as any editor shows it. Tests are exempt.
    files: ['packages/*/src/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 600, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  {
    // CommonJS on purpose: pnpm loads .pnpmfile.cjs with require().
    files: ['**/*.cjs'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
)
