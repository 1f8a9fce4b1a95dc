import { register } from 'node:module'

register('./nest11-hooks.mjs', import.meta.url)
