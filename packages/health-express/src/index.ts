export {
  DEFAULT_HEALTH_PATH,
  acemqHealth,
  acemqHealthHandler,
  type AcemqHealthOptions,
  type HealthHandler,
  type HealthMiddleware,
  type HealthNext,
  type HealthRequest,
  type HealthResponse,
} from './health-express.js'
