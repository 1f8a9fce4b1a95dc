export { AceMqConnection, ConnectionPublisher } from './ace-mq-connection.js'
export {
  AceMqModule,
  type AceMqModuleAsyncOptions,
  type AceMqTestModuleOptions,
} from './ace-mq-module.js'
export { Consume, type ConsumeOptions } from './consume.js'
export { AceMqHealthIndicator, type AceMqIndicatorResult } from './ace-mq-health-indicator.js'
export {
  DEFAULT_CONNECTION_NAME,
  DEFAULT_CONNECT_RETRY_DELAY,
  DEFAULT_CONNECT_RETRY_MAX_DELAY,
  DEFAULT_NEST_HEALTH_PATH,
  type AceMqConnectionOptions,
  type AceMqModuleOptions,
  type PublisherDefinition,
} from './module-options.js'
export { InjectAceMq, InjectPublisher, getAceMqToken, getPublisherToken } from './tokens.js'
