export {
  assertIdempotencyKey as assertId,
  assertOwnerToken,
  functionOption as fn,
  integerAtLeast,
  parseTableName,
  positiveMillis,
} from '@acemq/core/spi'
