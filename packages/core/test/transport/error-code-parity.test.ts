import { InMemoryTransport } from '../../src/index.js'
import { errorCodeParity } from '@acemq/testing'

/** The error-code suite on the in-memory transport: the codes RabbitMQ gives, unchanged. */
errorCodeParity('InMemoryTransport', { create: () => new InMemoryTransport() })
