import { AceMq, ConsumerOptions, InMemoryTransport, Topology } from '@acemq/core'

/** A reminder, delivered when it is due. */
interface Reminder {
  readonly text: string
}

// The in-memory transport has RabbitMQ's TTL and dead-lettering: the ladder runs as it would
// on a broker, with nothing to install.
const mq = await AceMq.connect(new InMemoryTransport(), { onError: () => undefined })
await mq.applyTopology(Topology.define().queue('reminders'))
const started = Date.now()
const seconds = (): string => ((Date.now() - started) / 1000).toFixed(1)

const arrived: string[] = []
await mq.consume<Reminder>('reminders', ConsumerOptions.defaults(), (message) => {
  arrived.push(message.payload.text)
  console.log(`${message.payload.text}: arrived (id ${message.envelope.id}, after ${seconds()} s)`)
})

const scheduler = mq.scheduler()
await scheduler.startDelivering() // the control consumer: run it in as many processes as you like
await scheduler.in('2500ms', '', 'reminders', { text: 'stand up' }, { id: 'r-stand-up' })
await scheduler.at(
  new Date(started + 1_500),
  '',
  'reminders',
  { text: 'drink water' },
  { id: 'r-water' },
)
await mq
  .publisher<Reminder>('', 'reminders')
  .send({ text: 'stretch' }, { id: 'r-stretch', delay: '1s' })
// Its destination does not exist yet: it waits, tried again every 5 s, never dropped.
await scheduler.in('500ms', '', 'late-reminders', { text: 'call back' }, { id: 'r-call-back' })
console.log(`scheduled: ${scheduler.scheduled}`)

while (arrived.length < 3) await new Promise((resolve) => setTimeout(resolve, 20))
const { reports } = await mq.health()
const report = reports.find((r) => r.name === 'scheduler')
console.log(`scheduler health: ${report?.status}, retrying ${report?.details['retrying']}`)

await mq.applyTopology(Topology.define().queue('late-reminders'))
await mq.consume<Reminder>('late-reminders', ConsumerOptions.defaults(), (message) => {
  arrived.push(message.payload.text)
  console.log(`${message.payload.text}: arrived once its queue existed`)
})
while (arrived.length < 4) await new Promise((resolve) => setTimeout(resolve, 20))

console.log(`delivered: ${scheduler.delivered}, failures along the way: ${scheduler.failures}`)
await mq.close()
