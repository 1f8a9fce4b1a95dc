export { DEFAULT_HEALTH_PATH, acemqHealth, type AcemqHealthOptions } from './health-fastify.js'
