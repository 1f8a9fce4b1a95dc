import { afterEach, beforeEach, expect, it } from 'vitest'
import { AceMq, ConfigurationError, InMemoryTransport, RetryPolicy } from '@acemq/core'

let transport: InMemoryTransport
let mq: AceMq

beforeEach(async () => {
  transport = new InMemoryTransport()
  mq = await AceMq.connect(transport)
})

afterEach(async () => {
  await mq.close({ drainTimeout: 0 })
})

const pass = async <T>(value: T): Promise<T> => value

it('refuses a pipeline without steps at build(), naming it', async () => {
  await expect(mq.pipeline('empty').build()).rejects.toThrow(
    new ConfigurationError(
      "pipeline 'empty' has no steps: add at least one with step(name, run) before build()",
    ),
  )
})

it('refuses a step name given twice at build(), declaring nothing', async () => {
  const builder = mq.pipeline('checkout').step('reserve', pass).step('reserve', pass)
  await expect(builder.build()).rejects.toThrow(
    "pipeline 'checkout': the step name 'reserve' is given twice; each step needs a name of its own (it names the queue 'checkout.reserve')",
  )
  expect(transport.hasQueue('checkout.reserve')).toBe(false)
})

it.each([
  ['', "''"],
  ['a,b', '"a,b"'],
  ['a.b', '"a.b"'],
  ['two words', '"two words"'],
  ['tab\there', '"tab\\there"'],
])(
  'refuses the step name %j at build(): it cannot be part of a queue name',
  async (step, shown) => {
    const builder = mq.pipeline('checkout').step('reserve', pass).step(step, pass)
    await expect(builder.build()).rejects.toThrow(
      `pipeline 'checkout': step name ${shown === "''" ? '""' : shown} cannot be part of a queue name: a step name is a non-empty string without ',' (the route header joins step names with commas), '.', whitespace or control characters`,
    )
    expect(transport.hasQueue('checkout.reserve')).toBe(false)
  },
)

it('refuses a step whose queue name would be over 255 bytes, naming the step', async () => {
  const long = 'x'.repeat(250)
  await expect(mq.pipeline('checkout').step(long, pass).build()).rejects.toThrow(
    /^pipeline 'checkout': the queue of step 'x{250}' is 259 bytes in UTF-8, over RabbitMQ's 255-byte limit/,
  )
})

it('refuses a step without a function at once, naming the step', () => {
  expect(() => mq.pipeline('checkout').step('reserve', 'nope' as never)).toThrow(
    `pipeline 'checkout': step(name, run) needs a function for step "reserve"; got "nope"`,
  )
})

it('refuses a pipeline name that is no queue name', () => {
  expect(() => mq.pipeline('amq.checkout')).toThrow(
    "pipeline(name) must not start with 'amq.', which RabbitMQ reserves for itself; got 'amq.checkout'",
  )
})

it('refuses to consume a step the pipeline does not have', async () => {
  await expect(
    mq
      .pipeline('checkout')
      .step('reserve', pass)
      .build({ consume: ['ship'] }),
  ).rejects.toThrow(
    `pipeline 'checkout': build(options.consume) must list steps of this pipeline (reserve); got ["ship"]`,
  )
})

it('refuses former steps that this version still has, or that cannot be step names, declaring nothing', async () => {
  const builder = mq.pipeline('checkout').step('reserve', pass).step('bill', pass)
  await expect(builder.build({ formerSteps: ['bill'] })).rejects.toThrow(
    `pipeline 'checkout': build(options.formerSteps) must list steps this version does not have (it has reserve, bill); got ["bill"]`,
  )
  await expect(builder.build({ formerSteps: ['a.b'] })).rejects.toThrow(
    `pipeline 'checkout': step name "a.b" cannot be part of a queue name`,
  )
  expect(transport.hasQueue('checkout.reserve')).toBe(false)
})

it('refuses to build the same pipeline twice on one connection until the first is closed', async () => {
  const first = await mq.pipeline('checkout').step('reserve', pass).build()
  await expect(mq.pipeline('checkout').step('reserve', pass).build()).rejects.toThrow(
    "pipeline 'checkout' is already built on this connection: use the Pipeline its build() returned, or close it first",
  )
  await first.close()
  const second = await mq.pipeline('checkout').step('reserve', pass).build()
  expect(second.steps).toEqual(['reserve'])
})

it('declares every step queue quorum, dead-lettering to its .dlq, with its .parked queue', async () => {
  await mq.pipeline('checkout').step('reserve', pass).step('ship', pass).build({ consume: [] })
  for (const queue of ['checkout.reserve', 'checkout.ship']) {
    expect(transport.queueInfo(queue)).toMatchObject({
      type: 'quorum',
      arguments: {
        'x-dead-letter-exchange': 'acemq.dlx',
        'x-dead-letter-routing-key': `${queue}.dlq`,
      },
    })
    expect(transport.hasQueue(`${queue}.dlq`)).toBe(true)
    expect(transport.hasQueue(`${queue}.parked`)).toBe(true)
  }
})

it("declares the rungs of the pipeline's retry policy for every step", async () => {
  await mq
    .pipeline('checkout')
    .step('reserve', pass)
    .step('ship', pass)
    .withRetry(RetryPolicy.fixed(3, '30s'))
    .build({ consume: [] })
  for (const queue of ['checkout.reserve', 'checkout.ship']) {
    expect(transport.queueInfo(`${queue}.retry.30s`)).toMatchObject({
      arguments: {
        'x-message-ttl': 30_000,
        'x-dead-letter-exchange': 'acemq.retry',
        'x-dead-letter-routing-key': queue,
      },
    })
  }
})

it('answers queueFor only for its own steps', async () => {
  const checkout = await mq.pipeline('checkout').step('reserve', pass).build({ consume: [] })
  expect(checkout.queueFor('reserve')).toBe('checkout.reserve')
  expect(() => checkout.queueFor('ship')).toThrow(
    `pipeline 'checkout': queueFor(step) must name one of its steps (reserve); got "ship"`,
  )
})
