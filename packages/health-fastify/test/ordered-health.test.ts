import { orderedHealthContract } from '@acemq/testing'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

orderedHealthContract('acemqHealth (Fastify plugin)', {
  serve: (source, options) =>
    serve(async (app) => {
      await app.register(acemqHealth, { mq: source, ...options })
    }),
})
