// The defaults every SQL idempotency store shares live in @acemq/core/spi; this store names them too.
export {
  DEFAULT_IDEMPOTENCY_TABLE,
  DEFAULT_PURGE_BATCH_SIZE,
  DEFAULT_PURGE_EVERY,
} from '@acemq/core/spi'
