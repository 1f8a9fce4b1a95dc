export {
  LOCK_WAIT_TIMEOUT,
  holdBrokerFaultLock,
  type HeldLock,
} from '../../test-support/broker-faults.js'
