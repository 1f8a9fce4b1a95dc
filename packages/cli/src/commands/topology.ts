import type { Command } from 'commander'
import { Topology, type Duration } from '@acemq/core'
import { headerInteger, toMillis, type Declaration } from '@acemq/core/spi'
import { UsageError } from '../exit-codes.js'
import type { CommandContext } from '../program.js'
import { parseRetry } from '../retry-spec.js'

/** `topology plan`. */
export function topologyCommands(program: Command, context: CommandContext): void {
  program
    .command('topology')
    .description('what AceMQ declares for a queue')
    .command('plan')
    .description(
      'the exchanges, queues and bindings a queue with a retry policy gets, without declaring anything',
    )
    .argument('<queue>', 'the source queue, e.g. orders.placed')
    .option(
      '--retry <policy>',
      'the retry policy: none(), fixed(3,5s) or exponential(5,1s,1m)',
      'none()',
    )
    .option('--give-up-after <age>', 'give up on messages older than this (e.g. 6h)')
    .action((queue: string, options: { retry: string; giveUpAfter?: string }, command: Command) => {
      const { output } = context(command)
      let policy = parseRetry(options.retry)
      if (options.giveUpAfter !== undefined) {
        try {
          policy = policy.giveUpAfter(toMillis(options.giveUpAfter as Duration, '--give-up-after'))
        } catch (error) {
          throw new UsageError((error as Error).message)
        }
      }
      const plan = Topology.define().queueWithRetry(queue, policy).plan()
      const human = [
        `${queue} with ${options.retry}: schedule ${
          policy.schedule().length === 0
            ? '(no retries)'
            : policy
                .schedule()
                .map((ms) => `${ms}ms`)
                .join(', ')
        }`,
        ...plan.map(describe),
      ].join('\n')
      output.result(human, { queue, schedule: policy.schedule(), declarations: plan.map(plain) })
    })
}

function describe(declaration: Declaration): string {
  switch (declaration.kind) {
    case 'exchange':
      return `exchange ${declaration.name} (${declaration.type}${declaration.durable ? ', durable' : ''})`
    case 'queue':
      return `queue    ${declaration.name} (${declaration.type}${declaration.durable ? ', durable' : ''})${argumentsText(declaration.arguments)}`
    case 'binding':
      return `binding  ${declaration.queue} <- ${declaration.exchange} (routing key ${declaration.routingKey})`
  }
}

function argumentsText(args: Readonly<Record<string, unknown>>): string {
  const entries = Object.entries(args)
  if (entries.length === 0) return ''
  return ` ${entries.map(([key, value]) => `${key}=${String(headerInteger(value) ?? value)}`).join(' ')}`
}

/** A declaration with typed integers as plain numbers, for JSON. */
function plain(declaration: Declaration): unknown {
  const args: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(declaration.arguments)) {
    args[key] =
      typeof value === 'object' && value !== null ? (headerInteger(value) ?? value) : value
  }
  return { ...declaration, arguments: args }
}
