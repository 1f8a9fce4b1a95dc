// The service checks moved to @acemq/testing; this re-export keeps a test written before the
// move working. New tests import them from '@acemq/testing'.
export * from '@acemq/testing/services'
