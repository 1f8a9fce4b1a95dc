import { orderedHealthContract } from '@acemq/testing'
import { acemqHealth } from '../src/index.js'
import { serve } from './serve.js'

orderedHealthContract('acemqHealth (Express middleware)', {
  serve: (source, options) => serve((app) => app.use(acemqHealth(source, options))),
})
