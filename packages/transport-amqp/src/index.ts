export { connect, type ConnectOptions } from './connect.js'
export { AmqpTransport, EXCHANGE_NOT_FOUND } from './amqp-transport.js'
export {
  DEFAULT_CONNECT_TIMEOUT,
  DEFAULT_HEARTBEAT,
  DEFAULT_NODE_ORDER,
  DEFAULT_RECOVERY_INITIAL_DELAY,
  DEFAULT_RECOVERY_MAX_DELAY,
} from './amqp-transport-options.js'
export type {
  AmqpConnectTarget,
  AmqpConnectTargets,
  AmqpNodeOrder,
  AmqpRecoveryOptions,
  AmqpTlsOptions,
  AmqpTransportLogger,
  AmqpTransportOptions,
} from './amqp-transport-options.js'
export { redactUrl } from './redact-url.js'
export {
  DEFAULT_MANAGEMENT_PORT,
  DEFAULT_MANAGEMENT_TIMEOUT_MS,
  DEFAULT_MANAGEMENT_TLS_PORT,
  discoverDeadLetterQueues,
  managementEndpoint,
  type DiscoveredQueue,
  type ManagementEndpoint,
} from './management-api.js'
