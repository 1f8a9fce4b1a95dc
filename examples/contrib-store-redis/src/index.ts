export {
  DEFAULT_KEY_PREFIX,
  EXPIRY_MARGIN,
  RedisIdempotencyStore,
  type RedisIdempotencyStoreOptions,
} from './redis-idempotency-store.js'
