import { AceMq } from '@acemq/core'; console.log(typeof AceMq)
